"""Processes, torch-free: launching build processes, their lifetime and cleanup, resource limits,
the build entry."""
