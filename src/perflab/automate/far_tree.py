"""A commit's built tree on the SSH machine its jobs run on: how bisect/series steps run there.

A commit is checked out and built here (the controller: its worktree, the user's --build, as for
a bisection on this machine); its jobs run on the machine (`--on`, a lab worker driving a
machine). A `cmd` job's `./prog` is the program built at that commit, run in its worktree; so
before the commit's jobs run there, the built worktree (every file but .git) is copied to the
machine, one directory per worktree of here:

    $TMPDIR/perflab-tree-KEY/s0, s1 ...   the worktrees' copies (tar over the shared connection)
    $TMPDIR/perflab-tree-KEY/cur          a symbolic link to the copy of the commit measured now

and the job's command runs as `cd $TMPDIR/perflab-tree-KEY/cur && exec COMMAND` (/bin/sh -c):
its relative paths are the tree's, as here, and the command stored with every commit's runs is
the same (KEY: this controller and the job's tag, so a resumed bisection stores the same
command). A copy is sent again only when its worktree moved to another commit; the machine's
lock is held while it is sent (the copy would disturb another job there).

The directory is removed when the Measurer closes; after a kill -9 of perflab it stays until the
same bisection is resumed (its KEY is the same: removed first) — `rm -rf $TMPDIR/perflab-tree-*`
on the machine otherwise. Only `cmd` jobs carry a commit's program: any other family runs
perflab's own programs, which the commit does not change (refused, `check_job`).
"""

from __future__ import annotations

import hashlib
import shlex
import socket
import subprocess
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.jobs.job import AtomicJob

PREFIX = "perflab-tree-"


def machine_of_job(job: AtomicJob):
    """The SSH machine a job runs on (its target's `machine`), or None (here, a guest)."""
    from perflab.execution.machine_lock import target_machine

    return target_machine(job.target)


def check_job(job: AtomicJob, where: str) -> None:
    """A job whose commit's program should run on an SSH machine: a `cmd` job; PerflabError. (On the
    machine's running kernel, or on a fixed kernel under test it kexecs into once per place.)"""
    if job.benchmark != "cmd":
        raise PerflabError(f"{where}: a commit measured on an SSH machine runs its own program there: the job must "
                           f"be a cmd job (`-- ./prog ...` or benchmark: cmd), not {job.benchmark}, whose programs "
                           "are perflab's and do not change with the commit")


def _words(params: dict) -> tuple[str, bool]:
    """The command as cmd runs it: a shell text, or words (split as cmd splits one spaced word)."""
    words = [params["command"]] if params.get("command") is not None else list(params.get("argv") or [])
    if params.get("shell"):
        return " ".join(words), True
    if len(words) == 1 and " " in words[0]:
        words = shlex.split(words[0])
    return shlex.join(words), False


class FarTrees:
    """Copies of worktrees on one SSH machine, and jobs rewritten to run in them."""

    def __init__(self, machine, key: str):
        self.machine, self.key = machine, key
        self.top: str | None = None                  # the machine's directory, once made
        self.slots: dict[Path, str] = {}             # worktree here -> its copy's name there
        self.sent: dict[str, str] = {}               # copy's name -> commit copied

    @classmethod
    def for_jobs(cls, jobs: list[AtomicJob]) -> FarTrees | None:
        machines = {machine_of_job(j) for j in jobs}
        if machines == {None}:
            return None
        if len(machines) != 1 or None in machines:
            raise PerflabError("the jobs of one commit run on one SSH machine")
        (machine,) = machines
        tag = next((j.tag for j in jobs if j.tag), "") or ""
        key = hashlib.sha1(f"{socket.gethostname()}\0{tag}\0{machine.on}".encode()).hexdigest()[:12]
        return cls(machine, key)

    def _connection(self):
        from perflab.execution.targets.ssh_machine import connection

        return connection(self.machine)

    def _make_top(self) -> str:
        if self.top is None:
            base = shlex.quote(self.machine.tmpdir) if self.machine.tmpdir else '"${TMPDIR:-/tmp}"'
            # What a killed bisection of the same key left goes first.
            script = (f'd={base}/{PREFIX}{self.key} && rm -rf "$d" && mkdir -m 700 "$d" && '
                      'cd "$d" && pwd -P')
            self.top = self._connection().run(script).strip()
            if not self.top.startswith("/"):
                raise PerflabError(f"{self.machine.on}: could not make a directory for the commit's tree "
                                   f"({self.top[:100]!r})")
        return self.top

    def place(self, path: Path, commit: str, what: str) -> None:
        """The built worktree `path` (at `commit`) copied there unless it is already, and made `cur`."""
        from perflab.core.steps import step
        from perflab.execution import machine_lock

        top = self._make_top()
        name = self.slots.setdefault(path, f"s{len(self.slots)}")
        q_top, q_name = shlex.quote(top), shlex.quote(name)
        flip = f"cd {q_top} && ln -sfn {q_name} cur.new && mv -T cur.new cur"
        with machine_lock.held(self.machine, what):
            if self.sent.get(name) == commit:
                self._connection().run(flip)
                return
            script = (f"cd {q_top} && rm -rf {q_name} {q_name}.new && mkdir {q_name}.new && "
                      f"tar -x -f - -C {q_name}.new && mv {q_name}.new {q_name} && {flip}")
            with step(f"{commit[:12]}: copying the built tree to {self.machine.on}"):
                self._send(path, script)
            self.sent[name] = commit

    def _send(self, path: Path, script: str) -> None:
        from perflab.execution.targets.ssh_machine import SshDown

        tar = subprocess.Popen(["tar", "-c", "-f", "-", "--exclude=./.git", "-C", str(path), "."],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            ssh = subprocess.run(self._connection().command(script), stdin=tar.stdout, capture_output=True,
                                 text=True, timeout=3600)
        finally:
            tar.stdout.close()
            tar_err = tar.stderr.read().decode(errors="replace")
            tar.wait()
        if tar.returncode != 0:
            raise PerflabError(f"tar of {path} failed: {' '.join(tar_err.split()[-30:])}")
        if ssh.returncode != 0:
            said = " ".join(ssh.stderr.split()[-30:]) or f"exit status {ssh.returncode}"
            raise SshDown(f"target down: copying the built tree to {self.machine.on} failed: {said}")

    def job(self, job: AtomicJob) -> AtomicJob:
        """`job` run in the current copy: `cd TOP/cur && exec COMMAND` (the same text for every commit)."""
        from dataclasses import replace

        from perflab import jobs

        text, shell = _words(job.params)
        cur = shlex.quote(f"{self._make_top()}/cur")
        params = {k: v for k, v in job.params.items() if k not in ("command", "argv", "shell")}
        params.update(command=f"cd {cur} && {text if shell else 'exec ' + text}", shell=True)
        return jobs.resolve(replace(job, params=params, parsed=None), "--on")

    def close(self) -> None:
        if self.top is None:
            return
        try:
            self._connection().run(f"rm -rf {shlex.quote(self.top)}")
        except PerflabError:
            pass        # the machine gone: the next bisection of this key removes it
        self.top = None
        self.slots.clear()
        self.sent.clear()


__all__ = ["FarTrees", "check_job", "machine_of_job"]
