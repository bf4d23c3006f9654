"""CSV cells a spreadsheet will not run: the guard against formula injection.

A cell that begins with =, +, -, @, a tab or a carriage return may be taken
for a formula by Excel, LibreOffice or Google Sheets (OWASP "CSV Injection").
Such a cell is written with a single quote in front, which spreadsheets show
as text. A number (-0.5, +3, -1e-05) is left as it is, so that it stays a
number. The guard is undone on reading: a cell made of one or more quotes and
then a trigger character loses one quote, and a value that itself began with
quotes and a trigger got one more on writing, so every string round-trips.
"""

from __future__ import annotations

import re

TRIGGERS = "=+-@\t\r"
_GUARDED = re.compile(r"'*[=+\-@\t\r]")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def guard(cell: object) -> object:
    """The cell as written to a CSV file (non-strings are returned unchanged)."""
    if not isinstance(cell, str) or not _GUARDED.match(cell) or _NUMBER.fullmatch(cell):
        return cell
    return "'" + cell


def unguard(cell: str) -> str:
    """The value a guarded cell stands for."""
    if cell.startswith("'") and _GUARDED.match(cell) and not _NUMBER.fullmatch(cell):
        return cell[1:]
    return cell
