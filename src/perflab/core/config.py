"""perflab's configuration file: settings that belong to a site, not to a command line.

$PERFLAB_CONFIG, else ~/.config/perflab/config.toml (XDG_CONFIG_HOME honoured):

    [mail]
    from = "perflab robot <perflab@lab.example>"
    smtp = "mail.example:25"      # absent: the local sendmail
    starttls = true
    user = "robot"
    password = "..."
    sendmail = "/usr/sbin/sendmail"
    # The tags a fix of a reported regression carries (perflab report regression, the robot):
    reported_by = "perflab robot <perflab@lab.example>"   # absent: `from`
    closes = "https://lists.lab.example/perf/{message_id}"  # absent: no Closes: tag
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from perflab.core.errors import UsageProblem

KNOWN = {"mail": {"from", "smtp", "starttls", "user", "password", "sendmail", "reported_by", "closes"}}
# Keys whose value is a line of text (they are written into a mail's body or headers).
TEXT = {("mail", "reported_by"), ("mail", "closes"), ("mail", "from")}
# The fields `closes` may name: the report's Message-ID, the culprit's sha and short sha.
CLOSES_FIELDS = ("message_id", "sha", "short")


def path() -> Path:
    if os.environ.get("PERFLAB_CONFIG"):
        return Path(os.environ["PERFLAB_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "perflab" / "config.toml"


def load() -> dict:
    """The configuration (empty when there is no file); UsageProblem naming the file and key when it is wrong."""
    p = path()
    try:
        text = p.read_text()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise UsageProblem(f"{p}: {e.strerror}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageProblem(f"{p}: not valid TOML: {e}") from None
    for section, value in doc.items():
        if section not in KNOWN or not isinstance(value, dict):
            raise UsageProblem(f"{p}: unknown section [{section}]; valid: {', '.join(KNOWN)}")
        for key in value:
            if key not in KNOWN[section]:
                raise UsageProblem(f"{p}: [{section}] unknown key {key!r}; valid: {', '.join(sorted(KNOWN[section]))}")
            _check(p, section, key, value[key])
    return doc


def _check(p: Path, section: str, key: str, value) -> None:
    """A value of the right kind, or UsageProblem naming the file, key and value."""
    if (section, key) in TEXT and (not isinstance(value, str) or not value.strip() or "\n" in value):
        raise UsageProblem(f"{p}: [{section}] {key} = {value!r}: expected one non-empty line of text")
    if (section, key) == ("mail", "closes"):
        try:
            value.format(**dict.fromkeys(CLOSES_FIELDS, ""))
        except (KeyError, IndexError, ValueError) as e:
            raise UsageProblem(f"{p}: [mail] closes = {value!r}: bad field {e}; "
                               f"valid: {', '.join('{' + f + '}' for f in CLOSES_FIELDS)}") from None
