"""The guide to the agent loop: one text, ``guide.md`` (package data), read when asked for.

``notebook-executor guide`` prints it whole, as a skill document (a YAML front matter with
``name`` and ``description``, then markdown); the MCP server sends its body as the server's
``instructions``. ``tests/integration/test_guide.py`` runs the commands it shows.
"""

from __future__ import annotations

from importlib import resources

__all__ = ["guide_body", "guide_text"]


def guide_text() -> str:
    """The guide as shipped: front matter, then the markdown body."""
    return resources.files(__package__).joinpath("guide.md").read_text(encoding="utf-8")


def guide_body() -> str:
    """The guide without its front matter (what an MCP client shows as instructions)."""
    text = guide_text()
    if text.startswith("---\n"):
        end = text.index("\n---\n", 4)
        text = text[end + len("\n---\n") :]
    return text.strip() + "\n"
