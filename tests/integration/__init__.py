"""The integration tier: real kernels and real servers, started on loopback."""
