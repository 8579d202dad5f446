"""Kernels: the real engine, warm pool, fork server, kernel-side script, work folders."""
