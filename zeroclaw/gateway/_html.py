"""A small escaping HTML builder: every `str` is text and is escaped; only `Markup` (made
here, by `tag` and `join`) is HTML. Attribute values are always escaped, quotes
included. So model output, an outside sender's name or an event's text can never become
markup, whatever it holds (`<script>`, `"onload=`, a closing tag).

    tag("td", {"class": "state"}, agent.state)  ->  Markup('<td class="state">running</td>')

No template language and no dependency: the dashboard's few pages are functions
(`_pages`), and what is escaped is decided by the type, not by remembering a filter.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

# Elements that have no closing tag.
_VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})


class Markup(str):
    """HTML we built ourselves (never made from outside text but through `tag`)."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """`value` as HTML text: Markup as it is, anything else escaped (quotes too)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def _children(children: Iterable[object]) -> Iterable[Markup]:
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, str | int | float):
            yield escape(child)
        elif isinstance(child, Iterable):
            yield from _children(child)
        else:
            yield escape(child)


def join(*children: object) -> Markup:
    """Children side by side (each escaped unless Markup; lists flattened, None skipped)."""
    return Markup("".join(_children(children)))


def tag(name: str, attrs: Mapping[str, object] | None = None, *children: object) -> Markup:
    """One element. An attribute whose value is None or False is left out; True is a bare
    attribute. Names are ours (literals in `_pages`), values are escaped."""
    parts = [name]
    for key, value in (attrs or {}).items():
        if value is None or value is False:
            continue
        if value is True:
            parts.append(key)
        else:
            parts.append(f'{key}="{escape(value)}"')
    opening = f"<{' '.join(parts)}>"
    if name in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{join(*children)}</{name}>")


def document(head: Iterable[Markup], body: Markup) -> bytes:
    """A whole page, UTF-8."""
    return (
        "<!doctype html>" + tag("html", {"lang": "en"}, tag("head", None, *head), body)
    ).encode()
