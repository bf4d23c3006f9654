"""`perflab monitors`: the monitors a run can gather, and what each records."""

from __future__ import annotations

import click


@click.command("monitors")
def monitors_cmd() -> None:
    """List the monitors, their options and what each records.

    Name them in a job (`monitors: {vmstat: {interval: 1}}`) or on any run
    command (`--monitor vmstat --monitor perf-stat:events=[context-switches]`).
    A monitor samples only during the timed part of a run; each says the
    window its figures cover (docs/monitors.md, "Windows").
    """
    from perflab.monitors import DEFAULT_SET, MONITORS, monitor_class
    from perflab.monitors.windows import TEXT

    for name in MONITORS:
        cls = monitor_class(name)
        options = []
        for key, field in cls.Options.model_fields.items():
            default = field.get_default(call_default_factory=True)
            options.append(f"{key}={default!r}" if not isinstance(default, list) else f"{key}={default}")
        click.echo(f"{name}{' (default set)' if name in DEFAULT_SET else ''}: {cls.summary}")
        click.echo(f"    options: {', '.join(options)}")
        click.echo(f"    records: {cls.records}")
        ticked = f"; {', '.join(p + '*' for p in cls.tick_sampled)} tick-sampled" if cls.tick_sampled else ""
        chosen = " (by default; see its option window)" if "window" in cls.Options.model_fields else ""
        click.echo(f"    window: {TEXT[cls.window]}{chosen}{ticked}")


COMMANDS = [monitors_cmd]
