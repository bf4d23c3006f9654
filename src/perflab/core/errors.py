"""The one exception type the CLI turns into a one-line message."""


class PerflabError(Exception):
    """A user-facing error: its message names the file, key or value at fault."""

    exit_code = 1


class UsageProblem(PerflabError):
    exit_code = 2
