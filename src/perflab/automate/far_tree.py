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

The directory is its owner's for as long as the owner lives: a shell of an ssh session of its own
(execution/machine_lock.py FarLease) makes it, holds a flock on it and removes it when its session
ends — when the Measurer closes, and also when perflab is killed (kill -9: its ssh dies with it,
the shell's stdin ends) or silent for 60 s. What such a shell could not remove (the shell itself
killed there, the machine rebooted with the copy on a disk) is removed by the next session of any
perflab on the machine, whoever it is, under the machine's lock: a perflab-tree-* directory of
that user on which no one holds the flock any more (execution.machine_lock.machine_script). A
live bisection's copy is never touched: its shell holds the flock. The copy is made under the
machine's lock too, so that no sweep finds it between its making and its flock. Only `cmd` jobs
carry a commit's program: any other family runs perflab's own programs, which the commit does not
change (refused, `check_job`).
"""

from __future__ import annotations

import hashlib
import shlex
import socket
import subprocess
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.jobs.job import AtomicJob

PREFIX = "perflab-tree-"          # execution.machine_lock.TREE_PREFIX: what its sweep looks for


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
        self.lease = None                            # the session that holds the directory there

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

    def _tree_script(self) -> str:
        """The remote command that makes the directory (what a killed bisection of the same key left
        goes first; one whose owner lives is refused: BUSY), holds its flock, says HELD PATH, keeps it,
        and removes it when its session ends."""
        from perflab.execution.machine_lock import NEEDS_FLOCK, SIGNAL_TRAPS, keep_alive

        lines = ["umask 077", NEEDS_FLOCK, f'd={self._base()}/{PREFIX}{self.key}',
                 'if [ -d "$d" ] && ! flock -n "$d" true 2>/dev/null; then echo "BUSY $d"; exit 0; fi',
                 'rm -rf "$d" && mkdir -m 700 "$d" && exec 9<"$d" && flock -n 9 || '
                 '{ echo "NONE cannot make $d"; exit 0; }',
                 SIGNAL_TRAPS, "trap 'cd / && rm -rf \"$d\"' EXIT", 'echo "HELD $(cd "$d" && pwd -P)"', keep_alive()]
        return "exec /bin/sh -c " + shlex.quote("\n".join(lines))

    def _base(self) -> str:
        return shlex.quote(self.machine.tmpdir) if self.machine.tmpdir else '"${TMPDIR:-/tmp}"'

    def _make_top(self) -> str:
        """The directory there, made (under the machine's lock: place) and held while this lives."""
        if self.top is None:
            from perflab.execution.machine_lock import FarLease

            lease = FarLease(self.machine, self._tree_script())
            if lease.take():
                self.lease, top = lease, lease.text.strip()
            elif lease.busy:
                raise PerflabError(f"{self.machine.on}: {lease.busy} is the copy of a live bisection of the same tag "
                                   "from this controller: wait for it to end, or give this one another --tag")
            else:
                # No flock there (util-linux): made as it is, removed at close, not swept after a kill -9.
                script = (f'd={self._base()}/{PREFIX}{self.key} && rm -rf "$d" && mkdir -m 700 "$d" && '
                          'cd "$d" && pwd -P')
                top = self._connection().run(script).strip()
            if not top.startswith("/"):
                raise PerflabError(f"{self.machine.on}: could not make a directory for the commit's tree "
                                   f"({top[:100]!r})")
            self.top = top
        return self.top

    def _lost(self) -> None:
        """The session that held the directory ended (a cut connection, the machine rebooted): the
        directory is gone or about to be swept; it is made and filled again."""
        if self.lease is not None and not self.lease.alive():
            self.lease.release()
            self.lease, self.top = None, None
            self.sent.clear()

    def place(self, path: Path, commit: str, what: str) -> None:
        """The built worktree `path` (at `commit`) copied there unless it is already, and made `cur`."""
        from perflab.core.steps import step
        from perflab.execution import machine_lock

        name = self.slots.setdefault(path, f"s{len(self.slots)}")
        with machine_lock.held(self.machine, what):
            self._lost()
            top = self._make_top()       # under the machine's lock: no sweep sees it before its flock
            q_top, q_name = shlex.quote(top), shlex.quote(name)
            flip = f"cd {q_top} && ln -sfn {q_name} cur.new && mv -T cur.new cur"
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
        if self.lease is not None:
            self.lease.release()         # the end of its session: the shell there removes the directory
            self.lease = None
        else:
            try:
                self._connection().run(f"rm -rf {shlex.quote(self.top)}")
            except PerflabError:
                pass        # the machine gone: the next bisection of this key removes it
        self.top = None
        self.slots.clear()
        self.sent.clear()


__all__ = ["FarTrees", "check_job", "machine_of_job"]
