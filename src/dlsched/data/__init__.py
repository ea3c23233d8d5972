"""Public data dlsched reads: the manifest of datasets, and fetching them into the data directory."""
