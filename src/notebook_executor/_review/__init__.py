"""Authoring and review: edit cells in place, diff notebooks and runs, validate, check."""
