"""What the everyday commands load (issue 47): facts, not times - tools/bench/startup.py times them.

`perflab --help` lists the commands from a table (no command module), and `log`, `show` and
`compare` read an SQLite store through the standard library's sqlite3 (perflab.store.reader),
without SQLAlchemy; `--help` and `log` import neither numpy nor scipy. The reader's rows are
what SQLAlchemy's types give, on SQLite and PostgreSQL, and a command that reads still reaps
a run whose process is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest
from sqlalchemy import case, func, select

from perflab import cli as cli_pkg
from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.store import open_store
from perflab.store import schema as s
from perflab.store.reader import RUN_COLUMNS, open_reader

HEAVY = ("numpy", "scipy", "sqlalchemy", "pydantic", "alembic", "yaml")
TIMES = ("time.elapsed_time", "time.user_time", "time.system_time")


def _plant(target: str) -> list[int]:
    """Three finished runs (tags base and head; a commit, dirty or not, a job, monitors, a failure)
    written through the Store, as `perflab run` writes them."""
    store = open_store(target)
    facts = {"testbox": "box1", "kernel_release": "6.1.0", "cc": "cc"}
    ids = []
    for i, (tag, dirty) in enumerate((("base", False), ("base", None), ("head", True))):
        rid = store.create_run(box="box1", environment=facts, benchmark="cmd", name="true", params={"command": "true"},
                               tag=tag, commit=f"{i:040x}" if dirty is not None else None, dirty=dirty,
                               comment="a note" if i == 2 else None,
                               job={"benchmark": "cmd", "runs": 3, "params": {"argv": ["true"]}})
        for rep in range(3):
            store.add_samples(rid, rep, [Sample(m, 0.001 * (1 + i + rep / 10), "s", -1) for m in TIMES]
                              + [Sample("time.exit_status", 0, "", 0)])
        if i == 1:
            store.set_run_monitors(rid, {"vmstat": {"options": {"interval": 1}, "status": "ok"}})
            store.add_monitor_series(rid, "vmstat", 0, [(None, 0.5, {"us": 10.0}), (1, 1.0, {"us": 12.5, "sy": 1.0})])
            store.add_failure(rid, "part", "exited 3")
        store.finish_run(rid, "finished")
        ids.append(rid)
    store.engine.dispose()
    return ids


def _modules(env: dict, *argv: str) -> tuple[set[str], str]:
    """The modules `perflab ARGV` imported in a process of its own (and its stdout)."""
    script = ("import json, os, sys\n"
              "from perflab.cli import main\n"
              "rc = main(sys.argv[1:])\n"
              "with open(os.environ['MODULES_OUT'], 'w') as f:\n"
              "    json.dump(sorted(sys.modules), f)\n"
              "sys.exit(rc)\n")
    out = os.path.join(os.path.dirname(env["PERFLAB_DB"]), "modules.json")
    proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120,
                          env=dict(env, MODULES_OUT=out))
    assert proc.returncode == 0, proc.stderr
    with open(out) as f:
        return {m.split(".")[0] for m in json.load(f)}, proc.stdout


def test_help_log_show_and_compare_load_only_what_they_use(tmp_path):
    db = str(tmp_path / "perflab.db")
    ids = _plant(db)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_")}
    env.update(PERFLAB_DB=db, XDG_CACHE_HOME=str(tmp_path / "cache"), PERFLAB_FS_STATE_DIR=str(tmp_path / "fs"))

    loaded, out = _modules(env, "--help")
    assert "  log " in out and "  show " in out
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    loaded, out = _modules(env, "log")
    assert [line.split()[0] for line in out.splitlines()[2:]] == [str(i) for i in ids]
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    # show summarises with numpy (perflab.stats.descriptive); neither reads the store through SQLAlchemy
    loaded, out = _modules(env, "show", str(ids[1]))
    assert "FAILED    part: exited 3" in out and "monitor   vmstat" in out
    assert not loaded & {"sqlalchemy", "alembic", "scipy", "pydantic", "yaml"}, loaded & set(HEAVY)
    # compare: numpy for its statistics; which parameters only change a run's duration and which
    # metrics are a family's secondary ones come from the registry (perflab.benchmarks), not the
    # family's module (pydantic); Student's t without scipy
    loaded, out = _modules(env, "compare", "base", "head")
    assert "time.elapsed_time" in out
    assert not loaded & {"sqlalchemy", "alembic", "scipy", "pydantic", "yaml"}, loaded & set(HEAVY)


def test_a_guest_is_started_ahead_before_pydantic_or_yaml_is_imported(tmp_path):
    """`run cmd --kernel K`: the guest's boot begins (cli.run._start_ahead) with what the
    family needs read from the registry, and the targets' modules on that path import neither
    pydantic nor YAML, so QEMU starts ~0.1 s sooner (docs/vm.md). A kernel that is no file: the
    target is resolved, nothing is begun."""
    script = ("import json, sys\n"
              "from perflab import benchmarks\n"
              "from perflab.execution import targets\n"
              "undo = targets.start_ahead({'kernel': sys.argv[1], 'vm': 'tcg'}, benchmarks.needs('cmd'), 'cmd')\n"
              "print(json.dumps([undo is None, sorted({m.split('.')[0] for m in sys.modules}),\n"
              "                  sorted(m for m in sys.modules if m.startswith('perflab.execution.targets.'))]))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "no-such-vmlinuz")], capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PERFLAB_DB"})
    assert proc.returncode == 0, proc.stderr
    nothing_begun, loaded, target_modules = json.loads(proc.stdout)
    assert nothing_begun and "perflab.execution.targets.qemu" in target_modules, target_modules
    assert not set(loaded) & {"pydantic", "yaml", "sqlalchemy", "numpy"}, set(loaded) & set(HEAVY)


def test_the_registrys_needs_are_each_familys():
    from perflab import benchmarks
    from perflab.execution import targets

    for name in benchmarks.FAMILIES:
        assert benchmarks.family(name).needs == benchmarks.needs(name)
        assert benchmarks.needs(name) <= set(targets.CAPABILITIES)


def test_the_registrys_duration_and_secondary_metrics_are_each_familys():
    """The registry declares what compare needs of a family without importing it; each family's
    class takes its sets from there, and each secondary metric is one its module catalogs."""
    import importlib

    from perflab import benchmarks
    from perflab.benchmarks.base import Metric

    for name, module in benchmarks.FAMILIES.items():
        family = benchmarks.family(name)
        assert family.duration_params == benchmarks.duration_params(name)
        assert family.secondary_metrics == benchmarks.SECONDARY_METRICS.get(name, frozenset())
        catalogued: set[str] = set(family.catalog)
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, dict) and value and all(isinstance(m, Metric) for m in value.values()):
                catalogued |= set(value)
        assert family.secondary_metrics <= catalogued, (name, family.secondary_metrics - catalogued)


def test_the_top_level_page_lists_each_commands_first_paragraph():
    """COMMAND_SUMMARIES holds what `perflab --help` shows of each command: its help's first
    paragraph. A command whose first paragraph changed needs its line there changed too."""
    cli_pkg.cli.load_all()
    ctx = click.Context(cli_pkg.cli, info_name="perflab")
    assert set(cli_pkg.COMMAND_SUMMARIES) == set(cli_pkg.COMMAND_MODULES)
    for name, summary in cli_pkg.COMMAND_SUMMARIES.items():
        command = cli_pkg.cli.get_command(ctx, name)
        first = (command.help or "").split("\n\n")[0]
        assert summary == " ".join(first.split()), f"COMMAND_SUMMARIES[{name!r}] differs from perflab {name}'s help"
        assert not command.short_help and not command.hidden, name   # the page would read those instead


def test_the_readers_run_columns_are_the_schemas():
    assert RUN_COLUMNS == tuple(c.name for c in s.run.columns)


def _reference_runs(engine):
    """The runs as SQLAlchemy's types decode them (the query the Store made before issue 47)."""
    q = (select(s.run, s.testbox.c.name.label("box"), s.environment.c.facts.label("environment"))
         .join(s.testbox, s.testbox.c.id == s.run.c.testbox_id)
         .join(s.environment, s.environment.c.id == s.run.c.environment_id)
         .order_by(s.run.c.started, s.run.c.id))
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(q)]


def _reference_log(engine):
    means = [func.avg(case((s.sample.c.metric == m, s.sample.c.value))) for m in TIMES]
    q = (select(s.run.c.id, s.run.c.started, s.run.c.status, s.run.c.tag, s.run.c.commit, s.run.c.dirty,
                s.run.c.comment, s.run.c.name, s.run.c.benchmark, *means)
         .select_from(s.run.outerjoin(s.sample, (s.sample.c.run_id == s.run.c.id) & s.sample.c.metric.in_(TIMES)))
         .group_by(s.run.c.id).order_by(s.run.c.started, s.run.c.id))
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(q)]


def _means(rows) -> list[tuple]:
    """log rows with their means to 12 digits: PostgreSQL may sum a run's samples in another order
    with another plan (a last-digit difference)."""
    return [tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in r) for r in rows]


def test_the_run_queries_give_what_sqlalchemy_gives(store_url):
    """On either backend the Store's run queries (plain SQL on a DB-API cursor) decode what
    SQLAlchemy's column types decode - times, booleans, JSON - and so does the sqlite3 Reader."""
    ids = _plant(store_url)
    store = open_store(store_url)
    runs, log = _reference_runs(store.engine), _reference_log(store.engine)
    readers = [store]
    if "://" not in store_url:
        reader = open_reader(store_url)
        assert reader is not None
        readers.append(reader)
    for r in readers:
        assert [tuple(x) for x in r.find_runs()] == runs
        assert [tuple(x) for x in r.find_runs(tag="base", box="box1", ids=ids[:2])] == runs[:2]
        assert r.find_runs(ids=[]) == [] and r.find_runs(uuids=[]) == []
        assert tuple(r.get_run(f"#{ids[2]}")) == runs[2]
        assert r.get_run(ids[2]).dirty is True and r.get_run(ids[2]).started.year >= 2026
        assert r.get_run(ids[2])._mapping["box"] == "box1"   # as SQLAlchemy's Row answers
        assert _means(r.log_rows(metrics=TIMES)) == _means(log)
        assert _means(r.log_rows(tag="head", since=runs[0][RUN_COLUMNS.index("started")])) == _means(log[2:])
        assert [(f.run_id, f.item, f.message) for f in r.failures(ids)] == [(ids[1], "part", "exited 3")]
        assert r.run_names() == (["cmd"], ["true"], 1)
        assert len(r.samples(ids)) == 3 * 3 * 4
        assert r.sample_counts(ids) == {i: 12 for i in ids} and r.sample_counts([]) == {}
        assert _means([(k, *v) for k, v in r.metric_sums(ids, TIMES[:1]).items()]) == _means(
            [((i, TIMES[0]), sum(0.001 * (1 + n + rep / 10) for rep in range(3)), 3) for n, i in enumerate(ids)])
        assert r.metric_values(ids[:1], TIMES[:1]) == {(ids[0], TIMES[0]): [0.001, 0.0011, 0.0012]}
        assert [tuple(x) for x in r.monitor_series(ids, "vmstat")] == [
            (ids[1], "vmstat", 0, None, 0.5, {"us": 10.0}), (ids[1], "vmstat", 0, 1, 1.0, {"us": 12.5, "sy": 1.0})]
        assert r.monitor_series(ids, "perf-stat") == [] and r.monitor_series([]) == []


def test_a_reading_command_still_reaps_a_run_whose_process_is_gone(cli):
    """`perflab log` opens the store without SQLAlchemy only when there is nothing to write: a run
    of this host still 'running' whose process is gone is marked interrupted, as before."""
    ids = _plant(str(cli.db))
    # pid_start "0": no live process started at boot tick 0, so the writer is gone whoever has the pid now
    import sqlite3
    import socket

    con = sqlite3.connect(cli.db)
    with con:
        con.execute("UPDATE run SET status = 'running', host = ?, pid = ?, pid_start = '0' WHERE id = ?",
                    (socket.gethostname(), os.getpid(), ids[2]))
    con.close()
    assert open_reader(str(cli.db)) is None
    out = cli("log").stdout
    assert "INTERRUPTED" in out.splitlines()[-1]
    assert cli.sql("SELECT status FROM run WHERE id = ?", (ids[2],)) == [("interrupted",)]
    assert open_reader(str(cli.db)) is not None   # reaped: the next command reads without SQLAlchemy


@pytest.mark.parametrize("why", ["missing", "old revision", "a URL"])
def test_the_reader_leaves_to_the_store_what_it_cannot_read_plainly(tmp_path, why):
    db = tmp_path / "perflab.db"
    if why != "missing":
        _plant(str(db))
    if why == "old revision":
        import sqlite3

        con = sqlite3.connect(db)
        with con:
            con.execute("UPDATE alembic_version SET version_num = '0004'")
        con.close()
    assert open_reader(f"sqlite:///{db}" if why == "a URL" else str(db)) is None
    assert db.exists() == (why != "missing")   # nothing created: the Store creates a new store


def test_compares_t_distribution_is_scipys_on_either_side_of_its_switch(monkeypatch):
    """perflab.stats.compare takes Student's t from perflab.stats.student_t below SCIPY_FROM
    elements and from scipy.special otherwise, whatever the process has imported (a figure is
    the same digits in every process): the same figures either way."""
    import numpy as np
    from scipy import special

    from perflab.stats import compare

    rng = np.random.default_rng(47)
    df = np.concatenate([rng.uniform(1, 40, 300), rng.uniform(40, 1e4, 100), [1.0, 2.5, np.inf, np.nan, 0.0]])
    t = np.concatenate([rng.normal(0, 4, 400), [np.inf, -np.inf, 0.0, 1.0, 1.0]])
    p = np.concatenate([rng.uniform(0.5, 1, 400), [0.975, 0.9, 0.95, 0.975, 0.975]])
    assert df.size < compare.SCIPY_FROM
    # as in `perflab compare`, which has not imported scipy: the math-module path
    monkeypatch.delitem(sys.modules, "scipy.special")
    assert compare._special(df.size) is None
    for ours, theirs in ((compare._stdtr(df, t), special.stdtr(df, t)),
                         (compare._stdtr(df, -t), special.stdtr(df, -t)),
                         (compare._stdtrit(df, p), special.stdtrit(df, p))):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=0)
    assert compare._special(compare.SCIPY_FROM) is not None
    without = compare._stdtrit(df, p)
    monkeypatch.undo()
    assert "scipy.special" in sys.modules and compare._special(df.size) is None
    # bit for bit what the process without scipy.special computed
    assert np.array_equal(compare._stdtrit(df, p), without, equal_nan=True)


@pytest.mark.parametrize("user_setting", [None, "2"])
def test_numpy_is_loaded_with_one_blas_thread_and_the_environment_is_left_alone(tmp_path, user_setting):
    """perflab's commands load numpy with OpenBLAS on one thread (its spinning threads cost
    `show` half its time on a busy machine), without leaving OPENBLAS_NUM_THREADS in the
    environment a benchmark inherits, and a user's own setting wins."""
    db = str(tmp_path / "perflab.db")
    ids = _plant(db)
    script = ("import contextlib, io, json, os, sys\n"
              "from perflab.cli import main\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    rc = main(['show', sys.argv[1]])\n"
              "print(json.dumps(['numpy' in sys.modules, len(os.listdir('/proc/self/task')),\n"
              "                  os.environ.get('OPENBLAS_NUM_THREADS')]))\n"
              "sys.exit(rc)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(PERFLAB_DB=db, PERFLAB_FS_STATE_DIR=str(tmp_path / "fs"))
    if user_setting:
        env["OPENBLAS_NUM_THREADS"] = user_setting
    proc = subprocess.run([sys.executable, "-c", script, str(ids[0])], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    numpy_loaded, threads, setting = json.loads(proc.stdout)
    assert numpy_loaded
    if user_setting:
        assert setting == user_setting   # left to OpenBLAS (which may cap it at the cores there are)
    else:
        assert (threads, setting) == (1, None)


def test_an_error_message_loads_no_sqlalchemy(tmp_path):
    """Every one-line error passes through the CLI's _one_line, which masks URL passwords: with the
    masking from perflab.store.rows, not perflab.store.db, an error costs no SQLAlchemy import (the
    test suite checks hundreds of them); the password is still masked."""
    script = ("import sys\n"
              "from perflab.cli import main\n"
              "rc = main(sys.argv[1:])\n"
              "print('sqlalchemy' in sys.modules, file=sys.stderr)\n"
              "sys.exit(rc)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_")}
    env.update(PERFLAB_DB=str(tmp_path / "perflab.db"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    open_store(env["PERFLAB_DB"]).engine.dispose()   # a store to read (making one is the Store's)
    for argv, needle in ((["log", "--per", "nan"], "--per"), (["show", "12"], "no run with id 12"),
                         (["--db", "postgresql://u:secret@127.0.0.1:1/x?password=other", "log", "--per", "0"], "--per")):
        proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120, env=env)
        *message, loaded = proc.stderr.splitlines()
        assert proc.returncode != 0 and len(message) == 1 and needle in message[0], proc.stderr
        assert "secret" not in proc.stderr and "other" not in proc.stderr
        assert loaded == "False", (argv, proc.stderr)


def _reading_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_")}
    env.update(PERFLAB_DB=str(tmp_path / "perflab.db"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               PERFLAB_FS_STATE_DIR=str(tmp_path / "fs"))
    return env


def test_report_profile_reads_the_symbols_row_without_pydantic(tmp_path):
    """`report profile` reads perf-profile's per-symbol row (comm, [k]/[.]) with
    perflab.monitors.symbol_rows, not the monitor's module and its options model (pydantic)."""
    import json as _json

    from perflab.monitors.perf import symbol_row, symbols_from_series
    from perflab.monitors.perf.profile import PerfProfileOptions, Profile, SymbolShare

    env = _reading_env(tmp_path)
    profile = Profile(10, 10, {"do_syscall_64": SymbolShare("do_syscall_64", "[k]", "getppid1", 61.0, 30.0)}, {})
    row = symbol_row(profile, PerfProfileOptions())
    assert symbols_from_series(row) == {"do_syscall_64": ("getppid1", "[k]")}
    store = open_store(env["PERFLAB_DB"])
    for tag, share in (("base", 40.0), ("head", 61.0)):
        rid = store.create_run(box="box1", environment={"testbox": "box1"}, benchmark="cmd", name="true",
                               params={"command": "true"}, tag=tag)
        for rep in range(3):
            store.add_samples(rid, rep, [Sample("time.elapsed_time", 0.01, "s", -1),
                                         Sample("perf-profile.children.cycles-pp.do_syscall_64", share + rep, "%", -1),
                                         Sample("perf-profile.self.cycles-pp.do_syscall_64", share / 2, "%", -1)])
        store.set_run_monitors(rid, {"perf-profile": {"options": {}, "status": "ok"}})
        store.add_monitor_series(rid, "perf-profile", 0, [(None, 0.0, _json.loads(_json.dumps(row)))])
        store.finish_run(rid, "finished")
    store.engine.dispose()
    loaded, out = _modules(env, "report", "profile", "base", "head")
    assert "getppid1  [k] do_syscall_64" in out, out
    assert not loaded & {"pydantic", "sqlalchemy", "yaml", "scipy"}, loaded & set(HEAVY)


def test_report_html_and_scaling_reach_the_family_views_without_pydantic(tmp_path):
    """A family's view hook lives in its package (perflab.benchmarks.<family>.view), so importing it
    runs the package's __init__: the families with a hook keep their code in a module of their own
    (.family, lmbench's .driver) and `report html` and `report scaling` load no pydantic."""
    env = _reading_env(tmp_path)
    store = open_store(env["PERFLAB_DB"])
    for tag, ops in (("base", 3.0e6), ("head", 2.5e6)):
        for n in (1, 2):
            rid = store.create_run(box="box1", environment={"testbox": "box1"}, benchmark="will-it-scale",
                                   name="will-it-scale", params={"test": "getppid1", "mode": "process", "nr_task": n},
                                   tag=tag)
            for rep in range(3):
                store.add_samples(rid, rep, [Sample("will-it-scale.workload", ops * n + rep, "ops/s", 1, exact=True)])
            store.finish_run(rid, "finished")
    store.engine.dispose()
    loaded, out = _modules(env, "report", "scaling", "base", "head")
    assert "getppid1 processes" in out, out
    assert not loaded & {"pydantic", "sqlalchemy", "yaml", "scipy"}, loaded & set(HEAVY)
    loaded, out = _modules(env, "report", "html", "base", "head", "-o", str(tmp_path / "r.html"))
    assert "getppid1" in (tmp_path / "r.html").read_text()
    assert not loaded & {"pydantic", "sqlalchemy", "yaml", "scipy"}, loaded & set(HEAVY)


def test_run_cmd_loads_no_yaml(tmp_path):
    """`perflab run cmd` reads no job file: its YAML loader (perflab.jobs.file) is made on first use,
    so the test suite's most frequent process imports no YAML, nor SQLAlchemy (the recorder).
    pydantic it needs: the cmd family's parameters are its model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_")}
    env.update(PERFLAB_DB=str(tmp_path / "perflab.db"), PERFLAB_FS_STATE_DIR=str(tmp_path / "fs"))
    loaded, out = _modules(env, "run", "cmd", "--runs", "1", "--", "true")
    assert "run #1: true" in out, out
    assert not loaded & {"yaml", "sqlalchemy", "scipy"}, loaded & set(HEAVY)
    from perflab.jobs import file as job_file

    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\nruns: 2\ncmd:\n  argv: [[true]]\n  bogus: 1\n")
    with pytest.raises(PerflabError, match=r"job.yaml:5: unknown key .bogus."):     # a key's line still named
        job_file.load(job)
