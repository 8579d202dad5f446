"""The run path: sources, parameters, results, scraps and run records of one run."""
