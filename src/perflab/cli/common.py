"""What the command modules share: the store option and output helpers."""

from __future__ import annotations

import datetime as dt

import click

from perflab.store import Store, open_store


def db_option(f):
    """`--db URL` on a subcommand, as well as on `perflab` itself."""
    return click.option("--db", "db", metavar="URL", default=None, expose_value=True,
                        help="Store URL or SQLite path (overrides the global --db and $PERFLAB_DB).")(f)


def get_store(db: str | None = None) -> Store:
    ctx = click.get_current_context()
    target = db or (ctx.find_root().obj or {}).get("db")
    store = open_store(target)
    store.reap_dead_runs()
    return store


def local_time(value: dt.datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """Stored times are UTC; people read their own clock."""
    if value is None:
        return "-"
    return value.replace(tzinfo=dt.UTC).astimezone().strftime(fmt)


def parse_since(text: str | None) -> dt.datetime | None:
    """'2026-11-01', '2026-11-01T12:00', or a relative '3d', '12h', '30m'."""
    if not text:
        return None
    units = {"d": 86400, "h": 3600, "m": 60, "w": 604800}
    if text[-1:] in units and text[:-1].isdigit():
        return dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a date (YYYY-MM-DD[THH:MM]) or an age like 3d, 12h", param_hint="--since") from None
    if value.tzinfo is None:
        value = value.astimezone()
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def fmt_num(value: float | None, width: int = 0) -> str:
    """Four significant figures, the way the C News log and LMbench print."""
    if value is None:
        return "-".rjust(width)
    if value == 0:
        text = "0"
    elif abs(value) >= 1000:
        text = f"{value:.0f}"
    else:
        text = f"{value:.4g}"
    return text.rjust(width)


class FiniteFloat(click.ParamType):
    """A float option that refuses nan and inf (click's FloatRange lets them through).

    `minimum` with `open_min` bounds it below, as FloatRange(min=..., min_open=...).
    """

    name = "float"

    def __init__(self, minimum: float | None = None, open_min: bool = False):
        self.minimum = minimum
        self.open_min = open_min

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.minimum is not None and (number < self.minimum or (self.open_min and number == self.minimum)):
            self.fail(f"{value!r} must be {'>' if self.open_min else '>='} {self.minimum:g}", param, ctx)
        return number
