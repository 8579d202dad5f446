"""What the facade, :class:`NotebookExecutor`, is composed of: the run records it holds, and
the functions of a source alone it exposes as static methods."""
