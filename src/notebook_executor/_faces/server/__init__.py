"""The per-user run server: the command line's warm engine, and sessions from the shell.

- :mod:`.paths`: where the server of this user and interpreter listens (a private folder);
- :mod:`.wire`: framed JSON messages on a Unix socket, the peer's uid checked;
- :mod:`.client`: reaching (or starting) the server; imported by every served command, so it
  imports only the standard library's small modules;
- :mod:`.remote_engine`: an engine that runs each job on the server's kernels;
- :mod:`.daemon`: the server process;
- :mod:`.session_host`: the process that holds one session, in its client's folder and
  environment.
"""
