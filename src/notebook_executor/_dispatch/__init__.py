"""Where checked runs go: this thread (with its bar of cells and live output), a pool of
threads, or a Dask cluster. The facade composes these; nothing here checks input."""
