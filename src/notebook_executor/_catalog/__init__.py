"""The catalog: the SQLite index of run records, its rows, its queries and run liveness."""
