"""The one exception type the CLI turns into a one-line message."""


class PerflabError(Exception):
    """A user-facing error: its message names the file, key or value at fault."""

    exit_code = 1


class UsageProblem(PerflabError):
    exit_code = 2


class TargetDown(PerflabError):
    """The place a job runs in could not be brought up, or stopped answering (a guest that did
    not boot, or died): the job's run fails, the others go on. `summary` is one line;
    `console_tail` the target's last words (a kernel's console), when it has any."""

    def __init__(self, summary: str, console_tail: str = ""):
        super().__init__(summary + (f"\n--- console tail ---\n{console_tail}" if console_tail else ""))
        self.summary = summary
        self.console_tail = console_tail
