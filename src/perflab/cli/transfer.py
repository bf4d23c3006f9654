"""`perflab export` and `perflab import`."""

from __future__ import annotations

import click

from perflab.cli.common import db_option, get_store, parse_since


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="Write to a file (default stdout).")
@click.option("--benchmark", "-b", help="Benchmark family or run name.")
@click.option("--tag", "-t", help="Only runs with this tag.")
@click.option("--box", help="Only runs on this testbox.")
@click.option("--since", help="Only runs started since a date or an age (3d).")
@click.option("--run", "run_ids", multiple=True, type=int, help="Only these run ids (repeatable).")
@db_option
def export_cmd(fmt, output, benchmark, tag, box, since, run_ids, db) -> None:
    """Write runs with their environments and samples as JSON or CSV.

    \b
    Example:
      perflab export --tag v6.8 -o v6.8.json
      perflab export --format csv --since 7d > week.csv
    """
    import os
    import tempfile

    from perflab import transfer

    store = get_store(db)
    rows = store.find_runs(benchmark=benchmark, tag=tag, box=box, since=parse_since(since),
                           ids=list(run_ids) if run_ids else None)
    data = transfer.collect(store, rows)
    text = transfer.to_json(data) if fmt == "json" else transfer.to_csv(data)
    if not output:
        click.echo(text, nl=False)
        return
    # Write beside the target and rename: a failed export leaves no half-written file.
    directory = os.path.dirname(os.path.abspath(output))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".perflab-export-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, output)
    except BaseException:
        os.unlink(tmp)
        raise
    click.echo(f"exported {len(data)} runs to {output}", err=True)


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@db_option
def import_cmd(files, db) -> None:
    """Read runs exported by `perflab export` (JSON or CSV) into this store.

    Runs already present (same uuid) are skipped; a bad file writes nothing.

    \b
    Example:
      perflab import lab-box1.json
    """
    from perflab import transfer

    store = get_store(db)
    for path in files:
        runs = transfer.read_file(path)
        imported, skipped = store.import_runs(runs)
        click.echo(f"{path}: imported {imported} runs" + (f", skipped {skipped} already present" if skipped else ""))


COMMANDS = [export_cmd, import_cmd]
