"""The programs that run inside kernel and template processes, loaded there by path.

Standard library only (and ipykernel, in the kernel): they import nothing of the package, which
a notebook's own environment may not have. ``sessions.py`` is also imported by the host.
"""
