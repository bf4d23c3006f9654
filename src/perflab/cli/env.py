"""`perflab env`: this machine's facts, or what differs between two runs."""

from __future__ import annotations

import click

from perflab.cli.common import db_option, get_store
from perflab.store.rows import redact
from perflab.core.text import printable

# An environment value (a kernel command line, a compiler banner) is shown whole up
# to this bound; control characters are made visible and URL passwords masked.
VALUE_LIMIT = 500


def _shown(value) -> str:
    return printable(redact(value), VALUE_LIMIT)


def _masked(value):
    """A fact for --json: strings with URL passwords masked, the rest as is."""
    return redact(value) if isinstance(value, str) else value


@click.command("env")
@click.option("--diff", "diff_runs", nargs=2, metavar="RUN1 RUN2", help="Show what differs between two runs' environments.")
@click.option("--box", help="Testbox name to report (default: hostname).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@db_option
def env_cmd(diff_runs, box, as_json, db) -> None:
    """Print the facts recorded with every run on this machine.

    \b
    Examples:
      perflab env
      perflab env --diff 12 31
    """
    import json

    from perflab.core import environment

    if diff_runs:
        store = get_store(db, reading=True)
        a, b = (store.get_run(r) for r in diff_runs)
        changes = environment.diff(a.environment, b.environment)
        if as_json:
            click.echo(json.dumps([{"key": k, "run1": _masked(x), "run2": _masked(y)} for k, x, y in changes], indent=2))
            return
        if not changes:
            click.echo(f"runs #{a.id} and #{b.id}: same environment")
            return
        keys = [printable(k) for k, _, _ in changes]
        width = max(len(k) for k in keys)
        click.echo(f"{'':{width}}  run #{a.id}  ->  run #{b.id}")
        for key, (_, x, y) in zip(keys, changes):
            click.echo(f"{key:{width}}  {_shown(x)}  ->  {_shown(y)}")
        return
    facts = environment.capture(box=box)
    if as_json:
        click.echo(json.dumps({k: _masked(v) for k, v in facts.items()}, indent=2))
        return
    width = max(len(k) for k in facts)
    for key, value in facts.items():
        click.echo(f"{key:{width}}  {_shown(value)}")


COMMANDS = [env_cmd]
