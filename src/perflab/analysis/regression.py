"""The 0-day robot's regression report: what changed, due to which commit, on what, how to reproduce.

`build(store, base, head)` compares the two (perflab.analysis.comparison, monitors that
changed included), picks the headline — the largest significant regression of
the benchmark's own metrics, else (an improvement mail) the largest improvement — and
gathers the commit (sha, author, subject from the recorded repository), the test
machine, the stored atomic job reduced to its non-default keys (perflab.jobs.minimal)
and the tags a fix should carry (config.toml's [mail] reported_by and closes).
perflab.report.regression formats it as the plain-text email; `send` mails it
through the local sendmail or the SMTP server of the configuration.
"""

from __future__ import annotations

import json

import hashlib
import os
import subprocess
from dataclasses import dataclass, field, replace
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from typing import TYPE_CHECKING

from perflab.analysis import variant
from perflab.analysis.comparison import ComparisonResult, MetricRow, compare
from perflab.core import config
from perflab.core.errors import PerflabError
from perflab.jobs.minimal import minimal
from perflab.stats.compare import IMPROVEMENT, PRIMARY, REGRESSION, SECONDARY

if TYPE_CHECKING:   # the store is read through what the command opened: no SQLAlchemy to import here
    from perflab.store import Store

DEFAULT_SENDER = "perflab <perflab@localhost>"


@dataclass
class CommitInfo:
    sha: str
    author: str = ""
    subject: str = ""
    date: str = ""

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclass
class Trailer:
    """The tags a fix of the reported issue carries (`[mail] reported_by`, `closes` in config.toml)."""

    reported_by: str
    closes: str | None = None   # a URL; None: no archive to point at


@dataclass
class KernelSide:
    """What one side's runs booted: the image, the VM mode and the guest's command line and figures."""

    image: str
    release: str | None = None
    mode: str | None = None
    cmdline: str | None = None
    cpus: int | None = None
    memory_mib: int | None = None
    build: str | None = None      # a kernel perflab built from a recipe: the commands to build it again
    boot_options: str = ""        # what the job added to the command line (mitigations=off): its variant's


@dataclass
class SeriesFacts:
    """A patch series tested against its base (automate.series): the mail names its patch."""

    patch: str                     # the culprit as "[PATCH 4/9] mm: ..."
    index: int
    total: int
    culprit: CommitInfo | None     # its commit in perflab's clone of the repository
    cover: str = ""                # the cover letter's subject
    mbox: str = ""                 # the mailbox or directory the series was read from
    user_repo: str = ""            # the repository it was applied to (left untouched)
    command: str = ""              # the `perflab series` command line that gives these figures
    am: tuple[str, ...] = ()       # what `git am` takes to apply it: the mailbox file (with --empty=drop
                                   # when a cover letter leads), or a directory's patch files in order


@dataclass
class RegressionReport:
    tag: str
    base: CommitInfo | None
    head: CommitInfo | None
    headline: MetricRow
    comparison: ComparisonResult
    machine: str
    job: dict | None            # the head's atomic job with only the keys that differ from the defaults
    repo: str | None
    build: str | None = None
    regressions: list[MetricRow] = field(default_factory=list)   # the primary metrics of the headline's kind
    detectable: float = float("nan")   # smallest change of the headline metric these samples detect with 90% power
    kind: str = REGRESSION      # REGRESSION, or IMPROVEMENT when the head improved and nothing regressed
    trailer: Trailer | None = None
    message_id: str = ""        # without angle brackets; Closes: may point at it
    secondary_left_out: list[str] = field(default_factory=list)   # secondary metrics not in the mail
    base_box: str | None = None
    base_export: str | None = None   # the file the base runs were exported to, beside the mail
    remote: str | None = None          # the repository's origin URL, when it has one
    kernels: list[KernelSide] | None = None   # base's and head's, for runs booted in a guest
    where: object | None = None        # analysis.views.profile.InstructionView: the functions whose instructions moved
    series: SeriesFacts | None = None  # base and head are a patch series' ends; the culprit is one of its patches
    change_kind: str = ""              # the kind of the change, one line (stats.change_kind), or why there is none
    revert_check: str = ""             # the culprit reverted on the head, one line (automate.series)
    # A kernel tree's build made each side's kernel: this image, a path in the build's output directory
    # ($KBUILD_OUTPUT), which the reproduce steps build and boot (a guest's or kexec'ed on the machine).
    kernel_image: str = ""

    @property
    def change(self) -> float:
        return self.headline.heads[0].pct_change

    @property
    def subject(self) -> str:
        if self.series is not None:
            # As the robot titles a series' report: the patch, then the metric's change over the series.
            return f"[{self.tag}] {self.series.patch}: {self.headline.metric} {self.change * 100:+.1f}% {self.kind}"
        who = self.head.short if self.head else self.comparison.labels[1]
        return f"[{self.tag}] {who}: {self.headline.metric} {self.change * 100:+.1f}% {self.kind}"


def commit_info(repo: str | None, sha: str | None) -> CommitInfo | None:
    """Author and subject of a recorded commit, read from its repository when it is still there."""
    if not sha:
        return None
    info = CommitInfo(sha)
    if repo:
        done = subprocess.run(["git", "-C", repo, "log", "-1", "--format=%H%x00%an <%ae>%x00%s%x00%aD", sha],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.count("\0") == 3:
            info.sha, info.author, info.subject, info.date = done.stdout.rstrip("\n").split("\0")
    return info


def _repository(run) -> str | None:
    """Where the run's commit can be read: the recorded repository (the user's, not a worktree
    since deleted), else the worktree if it is still there, else a lab job's source."""
    env = run.environment or {}
    source = run.job.get("source") if isinstance(run.job, dict) else None
    candidates = [env.get("sut_repo"), env.get("sut_worktree"), source.get("repo") if isinstance(source, dict) else None]
    for path in candidates:
        if isinstance(path, str) and path and os.path.isdir(path):
            return path
    return None


def _lab_source(run) -> str | None:
    """The repository URL a lab job was submitted with (bisect/robot --box), if not a local path."""
    source = run.job.get("source") if isinstance(run.job, dict) else None
    url = source.get("repo") if isinstance(source, dict) else None
    return url if isinstance(url, str) and "://" in url else None


def _number(value) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def kernel_side(run) -> KernelSide | None:
    """The kernel a run booted and the guest it ran in (its job's kernel and vm block, else the
    facts the guest recorded); None for a run on the host."""
    env = run.environment or {}
    decoded = variant.of(run)
    # A recipe's image is in the facts once built; a job's image is its kernel key.
    image = decoded.kernel.image or env.get("kernel_path")
    if not decoded.target.guest or not image:
        return None
    target = decoded.target
    return KernelSide(image=str(image), release=env.get("kernel_release"),
                      mode=target.mode or env.get("vm_mode"), cmdline=env.get("kernel_cmdline"),
                      cpus=_number(env.get("vm_cpus")) or target.cpus,
                      memory_mib=_number(env.get("vm_memory_mib")) or target.memory_mib,
                      build=env.get("kernel_build_commands") or None, boot_options=decoded.kernel.cmdline)


def tree_image(run) -> str:
    """The image of a kernel tree's build a run's machine was kexec'ed into, as a path in the build's
    output directory (`bisect/series/robot --kernel IMAGE --on BOX` record it as the parameter
    `kernel`, the job keeping each commit's own file); "" for any other run."""
    params = run.params if isinstance(run.params, dict) else {}
    job = run.job if isinstance(run.job, dict) else {}
    image = params.get("kernel")
    if not params.get("on") or not isinstance(image, str) or not image or image == job.get("kernel"):
        return ""
    return "" if os.path.isabs(image) or image.startswith("debian:") else image


def _memory(kib) -> str:
    """Memory as a reader says it: whole GiB from 1 GiB up, else MiB (never "0G")."""
    if not isinstance(kib, (int, float)) or kib <= 0:
        return ""
    gib = kib / 1048576
    return f" with {round(gib)}G memory" if gib >= 1 and abs(gib - round(gib)) < 0.05 else f" with {round(kib / 1024)} MiB memory"


def _machine(facts: dict, guest: KernelSide | None = None) -> str:
    if guest is not None:
        # The guest is the machine that ran the benchmark: its vCPUs and memory, the host beside them.
        cpus = f"{guest.cpus} vCPU{'' if guest.cpus == 1 else 's'}" if guest.cpus else "? vCPUs"
        memory = f", {guest.memory_mib} MiB memory" if guest.memory_mib else ""
        host = facts.get("host_cpu_model") or facts.get("cpu_model") or "unknown CPU"
        return f"{facts.get('testbox', '?')}: QEMU {guest.mode or '?'} guest, {cpus}{memory} (host: {host})"
    threads = facts.get("cpu_threads") or facts.get("cpu_cores") or "?"
    model = facts.get("cpu_model") or "unknown CPU"
    return f"{facts.get('testbox', '?')}: {threads} threads {model}{_memory(facts.get('memory_kib'))}"


def _headline_runs(selection, row: MetricRow, among: list | None = None) -> list:
    """The runs of one side that measured the headline's group: keyed as compare keyed them
    (selection.variant_keys: the parameters, with `variant` where the side's runs are of several),
    so that the mail's job, kernel and guest are the headline variant's, not another's of the tag.
    A head paired with the base's other parameters (one variant each) keeps its runs."""
    from perflab.analysis.selection import variant_keys

    want = (row.benchmark, json.dumps(row.params, sort_keys=True, default=str))
    keys = variant_keys(selection.runs, variants=selection.variants, among=among)
    runs = [r for r in selection.runs if keys[r.id][1:] == want]
    return runs or list(selection.runs)


def _findings(result: ComparisonResult, head: str, base: str) -> tuple[str, list[MetricRow]]:
    """The mail's kind and its primary metrics of that kind, largest change first: the
    regressions, else the improvements; PerflabError when neither is significant."""
    for kind in (REGRESSION, IMPROVEMENT):
        rows = sorted((r for r in result.verdicts(0, kind) if r.fdr_group == PRIMARY),
                      key=lambda r: r.heads[0].magnitude, reverse=True)
        if rows:
            return kind, rows
    raise PerflabError(f"no significant regression or improvement of {head} against {base} "
                       f"(`perflab compare {base} {head}` shows every metric)")


def _repetitions(result: ComparisonResult, row: MetricRow, job: dict) -> int | None:
    """The repetitions a reproduction should ask for: the runs measured of the headline's group on
    the larger side (a bisection measures a culprit again to match its good end), at least the job's."""
    sides = [sum(int((r.job or {}).get("runs") or 0) for r in _headline_runs(sel, row, result.selections))
             for sel in result.selections]
    return max([job.get("runs") or 0, *sides]) or None


def message_id(base: CommitInfo | None, head: CommitInfo | None, labels: list[str], metric: str, kind: str,
               sender: str) -> str:
    """The report's Message-ID: the same report gets the same id, so `Closes:` can name it before it is sent."""
    key = "\0".join([base.sha if base else labels[0], head.sha if head else labels[1], metric, kind])
    domain = parseaddr(sender)[1].rpartition("@")[2] or "perflab"
    who = head.short if head else "report"
    return f"{who}.{hashlib.sha1(key.encode()).hexdigest()[:12]}-{kind}@{domain}"


def trailer_of(mail: dict, msgid: str, head: CommitInfo | None) -> Trailer:
    """The trailer from the configuration's [mail] section: reported_by (default: the sender)
    and closes, a URL whose {message_id}, {sha} and {short} are filled in."""
    reported_by = mail.get("reported_by") or mail.get("from") or DEFAULT_SENDER
    closes = mail.get("closes")
    if closes:
        closes = closes.format(message_id=msgid, sha=head.sha if head else "", short=head.short if head else "")
    return Trailer(reported_by, closes or None)


def build(store: Store, base: str, head: str, *, tag: str = "perflab", benchmark: str | None = None,
          metrics: list[str] | None = None, repo: str | None = None, build_command: str | None = None,
          alpha: float = 0.05, threshold: float | None = None, secondary: bool = False,
          mail: dict | None = None, headline: str | None = None) -> RegressionReport:
    """The report of HEAD against BASE. `threshold`: the minimum effect (None: compare's default, the
    one rule of stats.compare.minimum_effects, so the mail calls what compare calls); `secondary`: keep
    the secondary metrics in the table; `mail`: the configuration's [mail] section (default: config.toml);
    `headline`: the metric to lead with when it changed (else the largest change)."""
    result = compare(store, [base, head], alpha=alpha, threshold=threshold, benchmark=benchmark,
                     metrics=metrics, monitors="changed")
    kind, rows = _findings(result, head, base)
    left_out = [] if secondary else [r.metric for r in result.rows if r.fdr_group == SECONDARY]
    if left_out:
        result = replace(result, rows=[r for r in result.rows if r.fdr_group != SECONDARY])
    # `headline`: the metric a bisection was judged by leads, when it is among the significant ones.
    headline = next((r for r in rows if r.metric == headline), rows[0])
    head_run = _headline_runs(result.selections[1], headline, result.selections)[-1]
    base_run = _headline_runs(result.selections[0], headline, result.selections)[-1]
    guests = [kernel_side(base_run), kernel_side(head_run)]
    remote = head_run.environment.get("sut_remote") or _lab_source(head_run)
    repo = repo or _repository(head_run)
    from perflab.stats.power import detectable_of

    if mail is None:
        mail = config.load().get("mail", {})
    base_info, head_info = commit_info(repo, base_run.commit), commit_info(repo, head_run.commit)
    msgid = message_id(base_info, head_info, result.labels, headline.metric, kind, mail.get("from", DEFAULT_SENDER))
    return RegressionReport(
        tag=tag, base=base_info, head=head_info, headline=headline, comparison=result,
        machine=_machine(head_run.environment, guests[1]),
        job=minimal(head_run.job, _repetitions(result, headline, head_run.job)) if head_run.job else None,
        repo=repo, remote=remote, build=build_command, regressions=rows,
        # An exact metric detects what its resolution lets it call; others, from their spread.
        detectable=(headline.heads[0].detectable if headline.heads[0].exact
                    else detectable_of(headline.base_values, headline.head_values[0], alpha=alpha)),
        kernels=guests if all(guests) else None, kernel_image=tree_image(head_run),
        kind=kind, trailer=trailer_of(mail, msgid, head_info) if kind == REGRESSION else None,
        message_id=msgid, secondary_left_out=left_out, base_box=base_run.box,
        where=where_view(store, base, head, benchmark, first=(headline.benchmark, headline.params)),
    )


WHERE_ROWS = 8


def where_view(store: Store, base: str, head: str, benchmark: str | None, first: tuple[str, dict] | None = None):
    """Where the instructions changed, when both sides counted them (insn-profile in a guest,
    measure: instructions on the host), one section per testcase, `first` (the headline's
    benchmark and parameters) leading; None otherwise."""
    from perflab.analysis.views.profile import has_instruction_profile, instruction_view

    try:
        if not (has_instruction_profile(store, base, benchmark) and has_instruction_profile(store, head, benchmark)):
            return None
        return instruction_view(store, base, head, benchmark, WHERE_ROWS, first=first)
    except PerflabError:
        return None


def check_recipients(to, flag: str = "--to") -> None:
    """Addresses to mail a report to, checked before any work (a series measures for hours, then
    mails): each one line with an address in it, the To header they make one the mail takes.
    PerflabError in one line naming the address at fault."""
    from perflab.core.text import printable

    for address in to:
        _, addr = parseaddr(address)
        if any(ord(c) < 32 or ord(c) == 127 for c in address) or "@" not in addr:
            raise PerflabError(f"{flag} '{printable(address, 120)}': expected one mail address (name@host), "
                               "no line breaks or control characters")
    try:
        EmailMessage()["To"] = ", ".join(to)
    except (ValueError, TypeError) as e:
        raise PerflabError(f"{flag} '{printable(', '.join(to), 120)}': not a mail header ({e})") from None


def message(report: RegressionReport, text: str, to: list[str], sender: str,
            attachments: list[tuple[str, bytes]] = ()) -> EmailMessage:
    """The mail: `text` as its body, `attachments` as (file name, JSON bytes) beside it."""
    msg = EmailMessage()
    msg["Subject"] = report.subject
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Date"] = formatdate(localtime=True)
    msg["Message-ID"] = f"<{report.message_id}>"
    msg.set_content(text)
    for name, data in attachments:
        msg.add_attachment(data, maintype="application", subtype="json", filename=name)
    return msg


def send(msg: EmailMessage, mail: dict) -> str:
    """Mail through the SMTP server of the configuration, else the local sendmail; how it went."""
    import smtplib

    if mail.get("smtp"):
        host, _, port = str(mail["smtp"]).rpartition(":") if ":" in str(mail["smtp"]) else (mail["smtp"], "", "25")
        try:
            with smtplib.SMTP(host, int(port), timeout=30) as smtp:
                if mail.get("starttls"):
                    smtp.starttls()
                if mail.get("user"):
                    smtp.login(mail["user"], mail.get("password", ""))
                smtp.send_message(msg)
        except (OSError, smtplib.SMTPException) as e:
            raise PerflabError(f"cannot send mail through SMTP server {host}:{port}: {e}") from None
        return f"sent to {msg['To']} through {host}:{port}"
    sendmail = mail.get("sendmail", "/usr/sbin/sendmail")
    try:
        done = subprocess.run([sendmail, "-t", "-oi"], input=msg.as_bytes(), capture_output=True, timeout=60)
    except FileNotFoundError:
        raise PerflabError(f"cannot send mail: no {sendmail} (install a mail transfer agent, or name an "
                           f"SMTP server in the configuration: [mail] smtp = \"host:port\")") from None
    if done.returncode != 0:
        raise PerflabError(f"{sendmail} exited with status {done.returncode}: "
                           f"{done.stderr.decode(errors='replace').strip()[:200]}")
    return f"sent to {msg['To']} through {sendmail}"
