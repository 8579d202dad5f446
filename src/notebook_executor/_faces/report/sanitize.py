"""Run HTML made safe to show: an allow-list sanitiser (nh3, the binding of Rust's ammonia).

A notebook's outputs and markdown are HTML that anyone could have written. Instead of escaping
it all (which shows tags as text), the notebook body nbconvert renders is cleaned to an
allow-list: headings, text, lists, tables, code, images. Script and style elements go with
their content; event handlers, ``style`` attributes and every attribute not listed go; links
keep only ``http``, ``https``, ``mailto`` and in-page ``#`` targets; an image may also be a
``data:`` URI of an image type, which is how notebooks carry plots. The pages' Content-Security-
Policy (see :mod:`.assets`) is the second line of defence.
"""

from __future__ import annotations

__all__ = ["clean_html"]

_TAGS = frozenset(
    ("a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col",
     "colgroup", "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure",
     "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p",
     "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "summary", "sup",
     "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "tt", "u", "ul", "var", "wbr")
)  # fmt: skip

_ATTRIBUTES: dict[str, set[str]] = {
    "*": {"class", "title", "lang", "dir"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "col": {"span"},
    "colgroup": {"span"},
    "ol": {"start", "type"},
    "li": {"value"},
    # nbconvert's heading anchors; a run page has no script that ids could confuse.
    **{f"h{level}": {"id"} for level in range(1, 7)},
    "div": {"id"},
}

_IMAGE_DATA = (
    "data:image/png;",
    "data:image/jpeg;",
    "data:image/gif;",
    "data:image/webp;",
    "data:image/svg+xml;",
)


def _attribute(tag: str, name: str, value: str) -> str | None:
    """Keeps ``data:`` URIs on images only, and only of image types."""
    if name in ("src", "href") and value.strip().lower().startswith("data:"):
        return value if tag == "img" and value.strip().lower().startswith(_IMAGE_DATA) else None
    return value


def clean_html(fragment: str) -> str:
    """``fragment`` reduced to the allow-list above."""
    import nh3

    return nh3.clean(
        fragment,
        tags=set(_TAGS),
        clean_content_tags={"script", "style"},
        attributes=_ATTRIBUTES,
        attribute_filter=_attribute,
        url_schemes={"http", "https", "mailto", "data"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
