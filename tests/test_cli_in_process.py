"""The `cli` fixture runs the reading commands in the test's process (tests/conftest.py, IN_PROCESS):
what a test reads from it is what the `perflab` program gives, byte for byte, status included."""

from __future__ import annotations

import subprocess

import scipy.special  # noqa: F401 (loaded in this process, as in every worker: the commands must not see it)

from conftest import IN_PROCESS, PERFLAB


def _as_a_process(cli, *args) -> subprocess.CompletedProcess:
    return subprocess.run([PERFLAB, *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=cli.env, cwd=cli.tmp)


def test_a_reading_command_in_process_gives_what_the_program_gives(cli):
    # A name with a carriage return, a terminal escape and a non-ASCII letter: what reaches the
    # screen (escaped or not) and how the pipe's reader turns \r into \n must agree too.
    cli("run", "cmd", "--runs", "2", "--name", "base\r\x1b[31mé", "--tag", "base", "--", "true")
    cli("run", "cmd", "--runs", "2", "--tag", "head", "--", "true")
    for args in (("log",), ("runs", "--tag", "base"), ("show", "1"), ("compare", "base", "head"),
                 ("compare", "base", "head", "--style", "json"), ("export", "--format", "csv"), ("show", "99"),
                 ("compare", "base"), ("log", "--nope"),
                 ("report", "table", "base", "head"), ("detect", "--since", "yesterday-ish")):
        assert args[0] in IN_PROCESS
        here, there = cli(*args, check=False), _as_a_process(cli, *args)
        assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr), args
    assert cli("show", "99", check=False).returncode != 0
    assert "base" in cli("log").stdout


def test_an_in_process_command_leaves_no_connection_open_behind_it(postgres_url, postgres_cluster, tmp_path, shared_cache):
    """A store a command opened is closed when the command returns, not when the collector finds
    it: the program's connection ends with its process, the test worker's would stay open (one
    PostgreSQL backend per call, up to max_connections, whatever test comes next in the worker)."""
    import gc

    from conftest import CLI

    cli = CLI(postgres_url, tmp_path, shared_cache)
    cli("run", "cmd", "--runs", "2", "--tag", "base", "--", "true")
    database = postgres_url.rsplit("/", 1)[1]
    others = ("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid != pg_backend_pid()", (database,))
    assert postgres_cluster.sql(database, *others) == [(0,)]
    collecting = gc.isenabled()
    gc.disable()   # what is closed is closed by the command, not by a collection that happens to run
    try:
        for args in (("runs",), ("log",), ("show", "1"), ("export", "--format", "csv"), ("compare", "base", "base"),
                     ("show", "99")):
            cli(*args, check=False)
            assert postgres_cluster.sql(database, *others) == [(0,)], args
    finally:
        if collecting:
            gc.enable()
