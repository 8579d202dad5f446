"""Records: the result dict, scraps, secrets scrubbed, and the run records of one run."""
