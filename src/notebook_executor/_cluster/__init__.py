"""Running beyond one machine: sweeps on a Dask cluster, parameter grids."""
