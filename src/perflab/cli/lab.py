"""`perflab worker`, `submit`, `queue`, `cancel`: the lab of many boxes (perflab.automate.lab)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from perflab.cli.common import db_option, placed_on, target_options

broker_option = click.option("--broker", metavar="URL", envvar="PERFLAB_BROKER", default=None,
                             help="Redis broker URL (default $PERFLAB_BROKER, else redis://127.0.0.1:6379/0).")


def _db(db: str | None) -> str | None:
    return db or (click.get_current_context().find_root().obj or {}).get("db")


@click.command("worker")
@click.option("--box", help="The box this worker serves: it consumes only queue perflab.box.BOX.")
@click.option("--machine", metavar="NAME",
              help="Instead of --box: serve box NAME, a machine of perflab's configuration ([machine.NAME]), driving "
                   "it over SSH from here: every job runs there, a submitted --kernel installed and kexec'ed there.")
@broker_option
@db_option
@click.option("--spool", "spool_dir", type=click.Path(file_okay=False), default=None,
              help="Directory of the local spool (default $XDG_STATE_HOME/perflab/spool).")
@click.option("--visibility-timeout", type=click.FloatRange(min=0.5), default=None, metavar="SECONDS",
              help="A job not acknowledged within this goes back to the queue; longer than the longest job "
                   "(default 21600).")
@click.option("--heartbeat", type=click.FloatRange(min=0.1), default=2.0, show_default=True, metavar="SECONDS",
              help="Interval of the state written to the broker.")
def worker_cmd(box, machine, broker, db, spool_dir, visibility_timeout, heartbeat) -> None:
    """Run the atomic jobs queued for BOX, one at a time, into the store (--db).

    Each run is recorded in a local spool first and then uploaded to the store;
    while the store is unreachable the runs wait in the spool.

    \b
    Example:
      perflab worker --box k62 --broker redis://:PW@lab:6379/0 --db postgresql://worker@lab/perflab
      perflab worker --machine box1 --broker redis://:PW@lab:6379/0 --db postgresql://worker@lab/perflab
    """
    from perflab.automate.lab import app as lab
    from perflab.automate.lab.worker import Worker

    if bool(box) == bool(machine):
        raise click.UsageError("give --box BOX (jobs run on this machine) or --machine NAME (jobs run on that "
                               "configured machine over SSH), one of them")
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    directory = Path(spool_dir) if spool_dir else state / "perflab" / "spool"
    Worker(box or machine, lab.broker_url(broker), _db(db), directory,
           visibility_timeout or lab.DEFAULT_VISIBILITY_TIMEOUT, heartbeat, machine=machine).run()


@click.command("submit")
@click.argument("job_file", type=click.Path())
@click.option("--box", "boxes", multiple=True, required=True, help="A box to run every atomic job on (repeatable).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the job file.")
@click.option("--tag", "-t", help="Tag of the runs (overrides the job file's tag).")
@click.option("--wait", is_flag=True, help="Follow the submission with a progress bar per box until all is done.")
@broker_option
def submit_cmd(job_file, boxes, overrides, tag, wait, broker, **targets) -> None:
    """Queue the atomic jobs of JOB_FILE on every --box; prints the submission id.

    With --kernel (and --vm) every job runs in a guest booted from that kernel by the
    box's worker, through the same runner as `perflab run JOB --kernel`; on a box that is
    an SSH machine (`perflab worker --machine`), --kernel debian:R|IMAGE is installed and
    kexec'ed on the machine. With --on the box's worker runs them on that machine over
    SSH, as a job file's `on:` key says.

    \b
    Example:
      perflab submit lmbench.yaml --box k62 --box xeon4 --tag 2.6.0 --wait
      perflab submit wis.yaml --box k62 --kernel /srv/kernels/bzImage --vm icount
    """
    from perflab import jobs
    from perflab.automate.lab import app as lab
    from perflab.automate.lab import client
    from perflab.jobs import guest

    # Before the file is expanded: the guest's vCPUs, not this machine's CPUs, decide its points.
    keys = placed_on(targets)
    atomic = jobs.load_atomic(job_file, guest.file_overrides(job_file, list(overrides), keys))
    if tag is not None:
        atomic = [job.with_(tag=tag) for job in atomic]
    if keys:
        from perflab.automate.lab.worker import TARGET_OPTIONS

        # What was asked, beside the normalized keys: a box that is an SSH machine boots --kernel
        # itself (kexec) and refuses --vm (perflab worker --machine).
        atomic = [job.with_(**{TARGET_OPTIONS: keys}) for job in atomic]
    url = lab.broker_url(broker)
    sid, count = client.submit(url, atomic, list(dict.fromkeys(boxes)), source=str(job_file))
    click.echo(sid)
    click.echo(f"queued {count} jobs ({len(atomic)} per box) on {', '.join(dict.fromkeys(boxes))}", err=True)
    if wait:
        from rich.console import Console

        rows = client.wait(url, sid, console=Console(stderr=True))
        for p in rows:
            click.echo(f"{p.box}: {p.done} done, {p.failed} failed, {p.cancelled} cancelled of {p.total}", err=True)
        if any(p.failed or p.cancelled for p in rows):
            raise SystemExit(1)


@click.command("queue")
@broker_option
def queue_cmd(broker) -> None:
    """The boxes of the lab: each worker's state and current job, the jobs queued per box."""
    from perflab.automate.lab import app as lab
    from perflab.automate.lab import client
    from perflab.core.text import printable

    rows = client.queue_status(lab.broker_url(broker))
    if not rows:
        click.echo("no boxes: nothing was submitted and no worker is running")
        return
    # MACHINE: the SSH machine a worker drives (`perflab worker --machine`), "-" for the worker's own.
    header = ("BOX", "MACHINE", "QUEUED", "STATE", "SINCE", "JOB", "SUBMISSION", "SPOOLED", "WORKER", "LAST ERROR")
    table = [header] + [(r["box"], printable(r["machine"], 40) or "-", str(r["queued"]), r["state"], r["since"],
                         printable(r["job"], 50), r["submission"] or "-", str(r["spooled"]), r["worker"],
                         printable(r["last_error"], 80) or "-")
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])


@click.command("cancel")
@click.argument("submission")
@broker_option
def cancel_cmd(submission, broker) -> None:
    """Cancel a submission: queued jobs are skipped, a running one is stopped (its run kept, interrupted)."""
    from perflab.automate.lab import app as lab
    from perflab.automate.lab import client

    rows = client.cancel(lab.broker_url(broker), submission)
    left = sum(p.total - p.ended for p in rows)
    click.echo(f"cancelled {submission}: {left} jobs not yet ended will not run")


@click.command("serve")
@db_option
@click.option("--port", type=click.IntRange(0, 65535), default=8040, show_default=True, help="TCP port (0: any free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; the dashboard has no login: bind beyond loopback only on a trusted network.")
@click.option("--broker", metavar="URL", envvar="PERFLAB_BROKER", default=None,
              help="Show the lab's boxes and queues from this broker too (default $PERFLAB_BROKER).")
def serve_cmd(db, port, host, broker) -> None:
    """Serve the dashboard, read-only: boxes and queues, recent runs and regressions, the HTML report.

    \b
    Example:
      perflab serve --db postgresql://viewer@db.lab/perflab --broker redis://:PW@broker:6379/0
    """
    from perflab.automate.lab.dashboard import Dashboard, make_server
    from perflab.store import open_store

    store = open_store(_db(db))   # no reap of dead runs: the dashboard never writes
    server = make_server(Dashboard(store, broker), host, port)
    click.echo(f"serving http://{host}:{server.server_address[1]}/ (Ctrl-C stops)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


COMMANDS = [worker_cmd, target_options(submit_cmd), queue_cmd, cancel_cmd, serve_cmd]
