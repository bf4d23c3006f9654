"""What a failed build's log says first: the compiler's error, not make's last words.

A parallel make that fails ends with `make[2]: *** Waiting for unfinished jobs....` and a
cascade of `Error 2` lines, the other jobs' output after the error, or both; the line that
says what is wrong is the first diagnostic of the compiler or the linker, further up. This
keeps that line and the few lines the compiler prints with it (the `In function` line before
it, the source line and the caret after), as a one-line message can carry them.
"""

from __future__ import annotations

import re

# gcc and clang ("file:line:col: error: ...", "fatal error:"), the linker ("undefined reference",
# "ld: ... error"), kbuild's own stops ("***" from scripts, not make's "make[N]: ***").
_ERROR = re.compile(r"(^|[\s:])(fatal )?error:|undefined reference to|^ld(\.\w+)?: |collect2: error"
                    r"|^\*\*\* ", re.IGNORECASE)
_MAKE = re.compile(r"^(g?make(\[\d+\])?|\S*/make(\[\d+\])?): ")
# What the compiler prints with a diagnostic: where it was ("In function", "In file included
# from"), the source line quoted ("   12 |  x = 1;") and its caret ("      |  ^").
_CONTEXT_BEFORE = re.compile(r": [Ii]n (function|member function|constructor|destructor)|^In file included from"
                             r"|^\s+from ")
_QUOTED = re.compile(r"^\s*\d*\s*\|")


def first_errors(log: str, lines: int = 4) -> list[str]:
    """The first error of the log with its context, at most `lines` lines (stripped); without a
    compiler's or linker's error, the last `lines` lines that are not make's own."""
    text = [line.rstrip() for line in log.splitlines()]
    for i, line in enumerate(text):
        if _MAKE.match(line.strip()) or _CONTEXT_BEFORE.search(line) or not _ERROR.search(line.strip()):
            continue
        start = i
        while start > 0 and i - start < 2 and _CONTEXT_BEFORE.search(text[start - 1]):
            start -= 1
        end = i + 1
        while end < len(text) and _QUOTED.match(text[end]) and end - i <= 2:
            end += 1
        kept = [t.strip() for t in text[start:end] if t.strip()]
        if len(kept) > lines:          # the error line itself is never the one left out
            at = kept.index(line.strip())
            kept = kept[max(0, min(at, len(kept) - lines)):][:lines]
        return kept
    rest = [t.strip() for t in text if t.strip() and not _MAKE.match(t.strip())]
    return rest[-lines:]
