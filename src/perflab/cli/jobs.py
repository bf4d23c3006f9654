"""`perflab jobs list|split` and `perflab rerun`: job files and atomic jobs."""

from __future__ import annotations

import re
from pathlib import Path

import click

from perflab.cli.common import db_option, get_store, placed_on, target_options
from perflab.cli.run import job_line
from perflab.core.errors import PerflabError
from perflab.core.text import printable


@click.group("jobs")
def jobs_group() -> None:
    """Job files: list the shipped ones, split one into its atomic jobs.

    \b
    Example:
      perflab jobs list
      perflab jobs split will-it-scale-seed.yaml -o /tmp/atomic
    """


@jobs_group.command("list")
def jobs_list() -> None:
    """The job files shipped with perflab, with the atomic jobs each expands to.

    \b
    Example:
      perflab jobs list && perflab run will-it-scale-seed.yaml
    """
    import shutil
    import textwrap

    from perflab import jobs as jobfiles

    width = min(max(shutil.get_terminal_size((100, 24)).columns, 60), 120)
    paths = jobfiles.shipped()
    name_width = max([len(p.name) for p in paths] + [10])
    for path in paths:
        atomic = jobfiles.load(path)
        count = f"{len(atomic)} atomic job{'' if len(atomic) == 1 else 's'}"
        click.echo(f"{path.name:{name_width}}  {atomic[0]['benchmark']:14} {count}")
        # The whole first sentence, wrapped under the name: never cut mid-sentence.
        for line in textwrap.wrap(description(path.read_text()), width=width - 4, break_on_hyphens=False):
            click.echo("    " + line)
    click.echo(f"(in {jobfiles.SHIPPED_DIR}; run one with `perflab run NAME.yaml`)", err=True)


def description(text: str) -> str:
    """A job file's description: the first sentence of its leading comment.

    The sentence ends at a full stop followed by a space or the line's end, or where a comment
    line ends and the next begins with a capital letter (a new sentence without a full stop
    before it).
    """
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        line = line.lstrip("#").strip()
        if lines and line[:1].isupper() and not lines[-1].endswith((",", ":", ";")):
            break
        lines.append(line)
    joined = " ".join(lines)
    end = re.search(r"\.(\s|$)", joined)
    return joined[: end.start() + 1] if end else joined


def _resolve(path: str) -> str:
    from perflab import jobs as jobfiles

    if Path(path).is_file():
        return path
    if Path(path).is_dir():
        raise PerflabError(f"job file {printable(path, 200)}: is a directory (give one job file)")
    for shipped in jobfiles.shipped():
        if shipped.name == path:
            return str(shipped)
    hint = jobfiles._did_you_mean(path, [p.name for p in jobfiles.shipped()])
    raise PerflabError(f"job file {printable(path, 200)}: no such file{hint} (shipped job files: `perflab jobs list`)")


@jobs_group.command("split")
@click.argument("job_file")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key first.")
@click.option("-o", "--output", "output", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Directory to write the atomic job files to.")
def jobs_split(job_file, overrides, output) -> None:
    """Write each atomic job of JOB_FILE as a YAML file named by its parameters (as `lkp split-job`).

    \b
    Example:
      perflab jobs split will-it-scale-seed.yaml -o atomic/ && perflab run atomic/*brk1*.yaml
    """
    from perflab import jobs as jobfiles
    from perflab.core import output as outfile

    atomic = jobfiles.load(_resolve(job_file), list(overrides))
    varying = jobfiles.varying_keys(atomic)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    names = [jobfiles.file_name(job, varying) for job in atomic]
    if len(set(names)) != len(names):
        raise PerflabError(f"{job_file}: two atomic jobs would get one file name")
    for job, name in zip(atomic, names):
        target = out / name
        outfile.write(str(target), jobfiles.to_yaml(job), "-o")
        click.echo(str(target))


@click.command("rerun")
@click.argument("run_id")
@click.option("--tag", "-t", help="Tag of the new run (default: the old run's).")
@click.option("--comment", "-m", help="A note kept with the new run.")
@click.option("--box", help="Testbox name (default: hostname).")
@click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded.")
@click.option("--trust", is_flag=True,
              help="Run a job from elsewhere (imported, or recorded on another machine) even if it runs "
                   "code of its own here: a kernel recipe's build, a host command, a compiler.")
@db_option
def rerun_cmd(run_id, tag, comment, box, repo, trust, db, **targets) -> None:
    """Run the atomic job a stored run ran, again, as a new run.

    With --kernel (and --vm) the job runs in a guest booted from that kernel, as
    `perflab run ... --kernel` would run it: compare the two with `kernel=RELEASE`.
    With --on it runs on a machine reached over SSH instead (docs/lab.md).

    A run that came from elsewhere (imported, or recorded on another machine) whose job would
    run code of its own on this machine (a kernel recipe's build, a host command, a compiler)
    is refused, saying what would run, unless --trust is given (docs/lab.md, Security).

    \b
    Examples:
      perflab rerun 12 --tag after-fix
      perflab rerun 12 --kernel vmlinuz-6.1.0-50-amd64 --vm icount
      perflab rerun 12 --on ssh://perf@box1
    """
    from perflab.runner import service

    store = get_store(db, recording=True)   # reads one run, records one: perflab.store.recording on SQLite
    run = store.get_run(run_id)
    if not run.job:
        raise PerflabError(f"run #{run.id} has no stored job (it was recorded before jobs were stored, or imported)")
    placed = placed_on(targets)
    if not trust:
        _refuse_foreign_host_code(run, placed.get("kernel") is not None)
    # The same checks as `run --kernel`: refused in one line before the store is written.
    request = service.RunRequest(f"perflab rerun {run.id}", stored_job=run.job, box=box, repo=repo,
                                 options=service.JobOptions(tag=tag, comment=comment, target_keys=placed))
    service.raise_first_failure(service.perform(request, lambda: store, on_done=job_line))


def provenance(run) -> str | None:
    """Where a stored run came from when not from this machine (a phrase), else None.

    A run perflab recorded keeps the host name of the machine that wrote it (`run.host`,
    Store.start_run); an import writes none (Store.import_runs), so a run without one
    came from a file: an export, a lab worker's upload."""
    import socket

    if run.host is None:
        return "was imported"
    if run.host != socket.gethostname():
        return f"was recorded on {printable(run.host, 80)}"
    return None


def _refuse_foreign_host_code(run, kernel_given: bool) -> None:
    """A run from elsewhere whose job would run code of its own here: PerflabError saying what."""
    from perflab.jobs import AtomicJob
    from perflab.jobs.trust import host_code

    where = provenance(run)
    if where is None:
        return
    try:
        job = AtomicJob.from_dict(run.job)
    except (TypeError, ValueError):
        return        # not a job at all: the runner refuses it in one line
    code = host_code(job, kernel_replaced=kernel_given)
    if code:
        raise PerflabError(f"perflab rerun {run.id}: run #{run.id} {where}, and its job would run on this machine: "
                           f"{'; '.join(code)}; give --trust to run it")


# `run`'s target options (--on), declared once there.
COMMANDS = [jobs_group, target_options(rerun_cmd)]
