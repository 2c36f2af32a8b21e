"""Devices and what they report: device resolution, the machine fingerprint, energy and NVML,
datasets."""
