"""Names and labels are data: characters that would change how the text around them
reads — control characters (a newline splits a Markdown heading), bidi overrides
and isolates (an RTL override reverses what follows), zero-width marks — are shown
as `\\u202e`-style escapes wherever a label, title or name is written (issue 29)."""

from __future__ import annotations

import unicodedata

# Bidi embeddings/overrides/isolates and marks, zero-width and BOM: all category Cf,
# listed so the reason is visible; every Cc/Cf/Zl/Zp character is escaped.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def is_hidden(ch: str) -> bool:
    """Whether `ch` would be invisible or change the layout of the text around it."""
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES


def visible(text: str, limit: int | None = None) -> str:
    """`text` with every hidden character escaped (`\\n`, `\\u202e`), cut to `limit`
    characters (with `…`) when given."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if not any(is_hidden(c) for c in text):
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if is_hidden(c) else c
                   for c in text)


def first_hidden(text: str) -> str | None:
    """The first hidden character of `text` as an escape (`\\u202e`), or None."""
    for c in text:
        if is_hidden(c):
            return c.encode("unicode_escape").decode("ascii")
    return None
