"""Records on disk, torch-free: CSV schema, results writer and readers, run ids, store, safe files,
fleet job files."""
