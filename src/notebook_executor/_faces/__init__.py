"""The faces: what callers outside Python reach (the command line, and the servers and plugins)."""
