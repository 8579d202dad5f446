"""The Model Context Protocol server (``notebook-executor mcp``); needs the ``mcp`` extra.

Nothing here is imported by ``import notebook_executor``: the command imports it when it runs.
"""
