"""perflab's configuration file: settings that belong to a site, not to a command line.

$PERFLAB_CONFIG, else ~/.config/perflab/config.toml (XDG_CONFIG_HOME honoured):

    [mail]
    from = "perflab robot <perflab@lab.example>"
    smtp = "mail.example:25"      # absent: the local sendmail
    starttls = true
    user = "robot"
    password = "..."
    sendmail = "/usr/sbin/sendmail"
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from perflab.core.errors import UsageProblem

KNOWN = {"mail": {"from", "smtp", "starttls", "user", "password", "sendmail"}}


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
    return doc
