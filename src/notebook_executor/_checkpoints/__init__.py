"""Durable checkpoints: a run's state on disk, for ``resume`` and incremental runs."""
