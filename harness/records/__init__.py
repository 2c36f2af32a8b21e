"""Records on disk, torch-free: the CSV schema, the results writer and readers, run ids, the store, safe file access,
fleet job files."""
