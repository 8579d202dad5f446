"""Records: the result dict, scraps, secrets scrubbed, and the run files of one run."""
