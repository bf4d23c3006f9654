"""Showing strings that came from users or from the outside world.

Tags, comments, command lines, metric names and environment values are shown
as text, never obeyed: a control character (an escape sequence that clears
the screen or retitles the window) is printed visibly, as ``\\x1b``, and a
long value is cut to a bound with the number of characters left out said.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL; tab is kept out of tables too (it breaks columns).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# What a table cell shows of one user string; `show` and json/csv keep it all.
CELL_LIMIT = 60


def _escape(match: re.Match) -> str:
    ch = match.group(0)
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{ord(ch):02x}")


def printable(text: object, limit: int | None = CELL_LIMIT) -> str:
    """`text` with control characters made visible and cut to `limit` characters.

    None becomes "-". A cut value ends with "…(+N)", N the characters left out.
    """
    if text is None:
        return "-"
    shown = _CONTROL.sub(_escape, str(text))
    if limit is not None and len(shown) > limit:
        keep = limit - len(f"…(+{len(shown)})")   # the marker is never longer than this
        keep = max(1, keep)
        shown = shown[:keep] + f"…(+{len(shown) - keep})"
    return shown


def brief(value: object, limit: int = 80) -> str:
    """A value for an error message: its repr, control characters made visible, a long one abbreviated.

    A long list shows its first items, `…`, its last item and how many it holds
    (`[1, 2, 3, …, 100] (100 items)`); anything else long is cut as `printable` cuts.
    """
    shown = printable(repr(value), None)
    if len(shown) <= limit:
        return shown
    if isinstance(value, (list, tuple)) and len(value) > 4:
        head = ", ".join(printable(repr(v), 20) for v in value[:3])
        return f"[{head}, …, {printable(repr(value[-1]), 20)}] ({len(value)} items)"
    return printable(shown, limit)
