"""perf-profile's per-symbol series row: the facts its metric names cannot hold (command, kernel or
user space), written by perflab.monitors.perf.profile.symbol_row and read back by `report profile`.

Apart from the monitor so that a view reads the row without the monitor's options model (pydantic):
the reading commands start in a blink (issue 47). docs/monitors-perf.md.
"""

from __future__ import annotations

import json

SYMBOLS_FIELD_KIND = "symbol"


def symbol_field(kind: str, comm: str, symbol: str) -> str:
    """One symbol's field name: JSON ["symbol", kind, comm, symbol] (the row stays {field: number})."""
    return json.dumps([SYMBOLS_FIELD_KIND, kind, comm, symbol])


def symbols_from_series(values: dict[str, float]) -> dict[str, tuple[str, str]]:
    """symbol_field's fields back to {symbol: (comm, kind)}; other fields are ignored."""
    out = {}
    for key in values:
        if not key.startswith("["):
            continue
        try:
            tag, kind, comm, symbol = json.loads(key)
        except (ValueError, TypeError):
            continue
        if tag == SYMBOLS_FIELD_KIND:
            out[symbol] = (comm, kind)
    return out
