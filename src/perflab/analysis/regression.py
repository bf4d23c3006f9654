"""The 0-day robot's regression report: what changed, due to which commit, on what, how to reproduce.

`build(store, base, head)` compares the two (perflab.analysis.comparison, monitors that
changed included), picks the headline — the largest significant regression of
the benchmark's own metrics — and gathers the commit (sha, author, subject from
the recorded repository), the test machine and the stored atomic job.
perflab.report.regression formats it as the plain-text email; `send` mails it
through the local sendmail or the SMTP server of the configuration.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from perflab.analysis.comparison import ComparisonResult, MetricRow, compare
from perflab.core.errors import PerflabError
from perflab.stats.compare import PRIMARY, REGRESSION
from perflab.store import Store


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
class RegressionReport:
    tag: str
    base: CommitInfo | None
    head: CommitInfo | None
    headline: MetricRow
    comparison: ComparisonResult
    machine: str
    job: dict | None
    repo: str | None
    build: str | None = None
    regressions: list[MetricRow] = field(default_factory=list)
    detectable: float = float("nan")   # smallest change of the headline metric these samples detect with 90% power
    remote: str | None = None          # the repository's origin URL, when it has one

    @property
    def change(self) -> float:
        return self.headline.heads[0].pct_change

    @property
    def subject(self) -> str:
        who = self.head.short if self.head else self.comparison.labels[1]
        return f"[{self.tag}] {who}: {self.headline.metric} {self.change * 100:+.1f}% regression"


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


def _machine(facts: dict) -> str:
    threads = facts.get("cpu_threads") or facts.get("cpu_cores") or "?"
    model = facts.get("cpu_model") or "unknown CPU"
    mem = facts.get("memory_kib")
    memory = f" with {round(mem / 1048576)}G memory" if isinstance(mem, (int, float)) and mem else ""
    return f"{facts.get('testbox', '?')}: {threads} threads {model}{memory}"


def build(store: Store, base: str, head: str, *, tag: str = "perflab", benchmark: str | None = None,
          metrics: list[str] | None = None, repo: str | None = None, build_command: str | None = None,
          alpha: float = 0.05, threshold: float = 0.01) -> RegressionReport:
    result = compare(store, [base, head], alpha=alpha, threshold=threshold, benchmark=benchmark,
                     metrics=metrics, monitors="changed")
    regressions = sorted((r for r in result.verdicts(0, REGRESSION) if r.fdr_group == PRIMARY),
                         key=lambda r: abs(r.heads[0].pct_change), reverse=True)
    if not regressions:
        raise PerflabError(f"no significant regression of {head} against {base} "
                           f"(`perflab compare {base} {head}` shows every metric)")
    headline = regressions[0]
    head_run = result.selections[1].runs[-1]
    base_run = result.selections[0].runs[-1]
    remote = head_run.environment.get("sut_remote") or _lab_source(head_run)
    repo = repo or _repository(head_run)
    from perflab.stats.power import detectable_of

    return RegressionReport(
        tag=tag, base=commit_info(repo, base_run.commit), head=commit_info(repo, head_run.commit),
        headline=headline, comparison=result, machine=_machine(head_run.environment), job=head_run.job,
        repo=repo, remote=remote, build=build_command, regressions=regressions,
        detectable=detectable_of(headline.base_values, headline.head_values[0], alpha=alpha),
    )


def message(report: RegressionReport, text: str, to: list[str], sender: str) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = report.subject
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Date"] = formatdate(localtime=True)
    msg["Message-ID"] = make_msgid(domain="perflab")
    msg.set_content(text)
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
