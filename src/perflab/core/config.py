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

    # A test box reached over SSH, named in `--on box1` or a job's `on: box1`
    # (perflab.execution.targets.ssh; docs/lab.md, "Test boxes over SSH"):
    [machine.box1]
    ssh = "ssh://perf@box1.lab.example:2222"   # or "perf@box1" or a Host of ~/.ssh/config
    ssh_config = "~/.ssh/lab_config"           # `ssh -F FILE` (absent: ssh's own, or $PERFLAB_SSH_CONFIG)
    ssh_options = ["-o", "ProxyJump=gw.lab.example"]   # more options for every ssh call
    tmpdir = "/var/tmp"                        # where the run directory is made (absent: $TMPDIR, /tmp)
    connect_timeout = 10                       # seconds (absent: 10)
    # The kernel under test booted there (`--on box1 --kernel debian:R|IMAGE`; execution/targets/kexec.py):
    kexec = true                               # perflab may install kernels there and kexec them
    power_cycle = "ipmitool -H box1-bmc -U admin -f ~/.bmc chassis power cycle"   # run here when a kernel hangs
    console = "cat /var/log/conserver/box1.log"   # run here: its output is the failed run's console text
    boot_timeout = 300                         # seconds a kernel (and the default one after) may take to answer
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from perflab.core.errors import UsageProblem

KNOWN = {"mail": {"from", "smtp", "starttls", "user", "password", "sendmail", "reported_by", "closes"},
         "machine": set()}
# The keys of one [machine.NAME] table, and what each must be.
MACHINE_KEYS = {"ssh": "a destination: ssh://[user@]host[:port], user@host or a Host of the ssh config",
                "ssh_config": "the path of an ssh config file", "ssh_options": "a list of ssh options",
                "tmpdir": "an absolute directory of the machine", "connect_timeout": "seconds, more than 0",
                "kexec": "true or false", "power_cycle": "a shell command line run here",
                "console": "a shell command line run here", "boot_timeout": "seconds, more than 0"}
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
        if section == "machine":
            for name, table in value.items():
                _check_machine(p, name, table)
            continue
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


def _check_machine(p: Path, name: str, table) -> None:
    """One [machine.NAME] table: known keys of the right kind, `ssh` given; UsageProblem otherwise."""
    if not isinstance(table, dict):
        raise UsageProblem(f"{p}: machine.{name}: expected a table [machine.{name}] with ssh = \"...\"")
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UsageProblem(f"{p}: [machine.{name}]: a machine's name is letters, digits, '-', '_' and '.'")
    for key, value in table.items():
        if key not in MACHINE_KEYS:
            raise UsageProblem(f"{p}: [machine.{name}] unknown key {key!r}; valid: {', '.join(MACHINE_KEYS)}")
        good = {"ssh_options": isinstance(value, list) and all(isinstance(v, str) and "\n" not in v for v in value),
                "connect_timeout": isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 3600,
                "boot_timeout": isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 86400,
                "kexec": isinstance(value, bool),
                "tmpdir": isinstance(value, str) and value.startswith("/") and "\n" not in value,
                }.get(key, isinstance(value, str) and bool(value.strip()) and "\n" not in value)
        if not good:
            raise UsageProblem(f"{p}: [machine.{name}] {key} = {value!r}: expected {MACHINE_KEYS[key]}")
    if "ssh" not in table:
        raise UsageProblem(f"{p}: [machine.{name}] has no ssh = \"[user@]host\": where is it reached?")


def machine(name: str) -> dict | None:
    """The settings of the machine `name` ([machine.NAME]), or None when the configuration has none."""
    found = load().get("machine", {}).get(name)
    return dict(found) if found is not None else None


def machines() -> list[str]:
    """The names of the configured machines."""
    return sorted(load().get("machine", {}))
