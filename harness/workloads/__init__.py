"""Workloads: each module turns a case into a `Timed` region plus the figures derived from it."""
