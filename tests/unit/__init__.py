"""The unit tier: no kernel, no server (an engine that runs no kernel)."""
