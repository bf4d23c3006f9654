"""The trust rule of `perflab rerun` (issue 45, R6; docs/lab.md, Security).

A run that came from elsewhere (imported, or recorded on another machine) carries a job someone
else wrote. Rerun, a kernel recipe of it ran its `cc` on this machine (`sh -c "touch X"` made X),
and would have run its tree's Makefile, its kcflags and config through make; a host `cmd` job
ran its command. Now such a job is refused in one line saying what would run, unless --trust.
"""

from __future__ import annotations

import json
import socket
import subprocess
import uuid as uuidlib
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.jobs import AtomicJob
from perflab.jobs.trust import host_code


def _git_tree(path: Path, makefile: str) -> Path:
    path.mkdir()
    (path / "Makefile").write_text(makefile)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, env=env, capture_output=True)
    return path


def _import_with_job(cli, tmp_path, change) -> int:
    """A run of this store exported, its job changed by `change`, given a new uuid and imported:
    the id of the imported run."""
    doc = json.loads(cli("export").stdout)
    run = doc["runs"][0]
    change(run["job"])
    run["uuid"] = str(uuidlib.uuid4())
    (tmp_path / "from-elsewhere.json").write_text(json.dumps(doc))
    cli("import", tmp_path / "from-elsewhere.json")
    return max(r[0] for r in cli.sql("SELECT id FROM run"))


def test_an_imported_kernel_recipe_is_not_built_without_trust(cli, tmp_path):
    """The issue's reproduction, exactly: export, kernel = {tree, tinyconfig, cc: sh -c "touch X"},
    vm tcg, a new uuid, import, rerun: X must not exist, and the line says what would have run."""
    tree = _git_tree(tmp_path / "T", "all:\n\ttrue\n")
    planted = tmp_path / "X"
    cli("run", "cmd", "--runs", "1", "--", "true")

    def recipe(job):
        job["kernel"] = {"tree": str(tree), "config": "tinyconfig", "cc": f'sh -c "touch {planted}"'}
        job["vm"] = {"mode": "tcg"}

    imported = _import_with_job(cli, tmp_path, recipe)
    proc = cli("rerun", imported, check=False, timeout=300)
    assert_one_line_error(proc, f"perflab rerun {imported}", "was imported", "--trust", f"touch {planted}",
                          str(tree), "tinyconfig")
    assert not planted.exists()
    assert cli.sql("SELECT count(*) FROM run") == [(2,)]      # nothing new recorded


def test_with_trust_an_imported_recipe_runs_its_compiler_and_makefile(cli, tmp_path):
    """--trust: the recipe's compiler and its tree's Makefile really run (this tree is no kernel,
    so the build then fails in one line: what matters is that the refusal is gone)."""
    compiler = tmp_path / "bin" / "gcc"
    compiler.parent.mkdir()
    compiler.write_text(f"#!/bin/sh\ntouch {tmp_path / 'compiler-ran'}\nexec /usr/bin/gcc \"$@\"\n")
    compiler.chmod(0o755)
    tree = _git_tree(tmp_path / "T", f"%:\n\ttouch {tmp_path / 'makefile-ran'}\n\tfalse\n")
    cli("run", "cmd", "--runs", "1", "--", "true")

    def recipe(job):
        job["kernel"] = {"tree": str(tree), "config": "tinyconfig", "cc": str(compiler)}
        job["vm"] = {"mode": "tcg"}

    imported = _import_with_job(cli, tmp_path, recipe)
    refused = cli("rerun", imported, check=False, timeout=300)
    assert_one_line_error(refused, "--trust", str(compiler))
    assert not (tmp_path / "compiler-ran").exists() and not (tmp_path / "makefile-ran").exists()

    trusted = cli("rerun", imported, "--trust", check=False, timeout=600,
                  env={"XDG_CACHE_HOME": str(tmp_path / "own-cache")})
    assert "--trust" not in trusted.stderr, trusted.stderr
    assert (tmp_path / "compiler-ran").exists(), trusted.stderr
    # This tree is no kernel: the build then fails in one line, with no traceback.
    assert trusted.returncode != 0 and "Traceback" not in trusted.stderr, trusted.stderr
    if "failed (tinyconfig)" in trusted.stderr:
        # The tree's Makefile ran (make tinyconfig), and failed as it says.
        assert (tmp_path / "makefile-ran").exists(), trusted.stderr


def test_an_imported_host_command_is_not_run_without_trust(cli, tmp_path):
    planted = tmp_path / "ran"
    cli("run", "cmd", "--runs", "1", "--", "true")

    def command(job):
        job["params"] = {"command": f"touch {planted}"}

    imported = _import_with_job(cli, tmp_path, command)
    proc = cli("rerun", imported, check=False)
    assert_one_line_error(proc, "was imported", f"the command touch {planted}", "--trust")
    assert not planted.exists()

    cli("rerun", imported, "--trust")
    assert planted.exists()
    assert cli.sql("SELECT count(*) FROM run WHERE status = 'finished'") == [(3,)]


def test_a_run_recorded_here_reruns_as_before_and_one_from_another_machine_does_not(cli, tmp_path):
    planted = tmp_path / "ran"
    cli("run", "cmd", "--runs", "1", "--", "touch", str(planted))
    planted.unlink()
    cli("rerun", "1")                       # this machine's own run: no --trust needed
    assert planted.exists()
    planted.unlink()
    # The same store written by another machine (a shared PostgreSQL store, a copied file).
    con = __import__("sqlite3").connect(cli.db)
    con.execute("UPDATE run SET host = 'elsewhere.example.org' WHERE id = 1")
    con.commit()
    con.close()
    proc = cli("rerun", "1", check=False)
    assert_one_line_error(proc, "was recorded on elsewhere.example.org", "--trust")
    assert not planted.exists()


@pytest.mark.parametrize("job, needles", [
    ({"benchmark": "cmd", "params": {"command": "make", "prepare": "rm -rf build"}},
     ["the command make", "the prepare command rm -rf build"]),
    ({"benchmark": "cmd", "params": {"argv": ["sh", "-c", "id > x"]}}, ["the command sh -c 'id > x'"]),
    ({"benchmark": "kernbench", "params": {"tree": "/src/linux", "target": "vmlinux"}},
     ["make vmlinux with the Makefile of /src/linux"]),
    ({"benchmark": "will-it-scale", "params": {"test": "brk1"}, "cc": "clang", "cflags": "-wrapper sh,-c,id"},
     ["the compiler clang with flags -wrapper sh,-c,id"]),
    ({"benchmark": "cmd", "params": {"command": "true"},
      "kernel": {"tree": "/t", "kcflags": "-O2 $(shell touch X)", "config": "--eval=$(shell id>X)config"}},
     ["KCFLAGS='-O2 $(shell touch X)'", "--eval=$(shell id>X)config olddefconfig bzImage"]),
    ({"benchmark": "cmd", "params": {"command": "true"}, "kernel": "/home/u/recipe.yaml"},
     ["the build of the kernel recipe in /home/u/recipe.yaml"]),
])
def test_what_would_run_here_is_named(job, needles):
    said = "; ".join(host_code(AtomicJob.from_dict(job)))
    for needle in needles:
        assert needle in said, said


@pytest.mark.parametrize("job", [
    {"benchmark": "will-it-scale", "params": {"test": "brk1", "nr_task": 1}},
    {"benchmark": "cmd", "params": {"command": "true"}, "kernel": "debian:6.1.0-47-amd64", "vm": {"mode": "tcg"}},
    {"benchmark": "kernbench", "params": {"size": "tiny"}},
])
def test_a_job_of_values_only_runs_nothing_of_its_own(job):
    assert host_code(AtomicJob.from_dict(job)) == []


def test_a_recipe_replaced_by_the_users_kernel_is_not_built():
    job = AtomicJob.from_dict({"benchmark": "cmd", "params": {"command": "true"}, "kernel": {"tree": "/t"}})
    assert host_code(job, kernel_replaced=True) == []
    assert socket.gethostname()        # the rule compares run.host with it
