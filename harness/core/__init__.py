"""Pure and torch-free: statistics, round plans, column and workload declarations, device peaks, the
option table."""
