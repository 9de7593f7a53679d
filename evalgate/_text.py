"""Text shown to a person: characters that cannot be seen are shown by their escape.

A zero-width space inside a URL (``http://host\\u200b/v1``), a right-to-left override in a
label, a BOM or a control character in a value read from evals.yaml all print as nothing, or
reorder what is around them: the message then names a value that looks right and is not (or
reads other than it is). Every such character in an error message or the scorecard is shown
as its escape, ``\\u200b``, as YAML and Python would write it. Newlines and tabs stay.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

# Format characters (zero-width, joiners, bidi embeddings, overrides and isolates, BOM, tag
# characters), invisible fillers and controls: listed, not looked up per character
# (unicodedata over a whole completion costs more than the rest of its escaping). Spaces
# (U+00A0 and the like) show as a gap and are left as they are.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u115f\u1160\u180b-\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufeff"
    "\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with each invisible or bidi-control character shown as its ``\\uXXXX``."""
    return _INVISIBLE.sub(_escape, text)
