"""The report's package data: Jinja2 templates, the style sheet and the one script.

Templates live in ``templates/`` and render with autoescape on, so a value from a run reaches
a page escaped unless a template marks it safe (only the sanitised notebook body and the
report's own style and script are). ``static/`` holds the style sheet and the script; both are
inlined into each page, which therefore opens alone from the file system, and the page's
Content-Security-Policy names their SHA-256 digests, so that no other style or script on the
page (one that slipped past the sanitiser, say) is applied or run.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

__all__ = ["content_policy", "render", "static_text"]

_PACKAGE = __name__.rsplit(".", 1)[0]


@functools.cache
def static_text(name: str) -> str:
    """The text of ``static/<name>`` (read once per process)."""
    return resources.files(_PACKAGE).joinpath("static").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def _environment() -> jinja2.Environment:
    # Imported here: jinja2 comes with nbconvert and is only needed when a report is written.
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader(_PACKAGE, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context: Any) -> str:
    """``templates/<template>`` rendered with ``context`` (autoescaped)."""
    return _environment().get_template(template).render(**context)


def _digest(text: str) -> str:
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


def content_policy(style: str, script: str | None) -> str:
    """The Content-Security-Policy of a page whose one style element is ``style`` and whose one
    script is ``script`` (None: no script at all).

    Nothing is fetched (``default-src 'none'``) but images written into the page as ``data:``
    URIs; only the report's own style and script, by digest, apply; no plugin, no ``<base>``,
    no form submission.
    """
    scripts = _digest(script) if script is not None else "'none'"
    return (
        "default-src 'none'; img-src data:; "
        f"style-src {_digest(style)}; script-src {scripts}; "
        "object-src 'none'; base-uri 'none'; form-action 'none'"
    )
