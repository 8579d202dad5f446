"""Kernels: the real engine, warm pool, fork server, work folders, and (``inside/``) the
programs that run inside kernels."""
