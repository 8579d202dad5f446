"""The groups of methods the facade, :class:`NotebookExecutor`, is composed of."""
