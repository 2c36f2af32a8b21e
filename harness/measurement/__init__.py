"""One measurement and its records: the synchronised clock, the round loop, cases, the run's
records, the runner."""
