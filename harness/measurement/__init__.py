"""One measurement and its records: the synchronised clock, the round loop, cases, the session, the
runner."""
