"""Kernel releases in version order: `uname -r` strings and Debian ABI names.

`6.1.170 < 6.1.176 < 6.12.107`; `6.9.0-rc1 < 6.9.0`; Debian's ABI names
(`6.1.0-47-amd64`) carry the upstream version only in `uname -v`
("#1 SMP PREEMPT_DYNAMIC Debian 6.1.170-3 (2025-..)"), so `order_key` takes that too:
with it the release is placed at its upstream version, without it by the ABI number
(Debian raises it with every upstream update of a stable series, so its order is the
same). A string that is no kernel release sorts after every release, by its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# major.minor[.patch] and what follows: -rcN, a Debian/Ubuntu ABI number (-47-amd64), +local.
_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(.*)$")
_RC = re.compile(r"^-rc(\d+)(.*)$")
_ABI = re.compile(r"^-(\d+)(?:[-.+](.*))?$")
# What Debian's (and Ubuntu's mainline-style) `uname -v` says of the upstream version.
_DEBIAN_VERSION = re.compile(r"\bDebian (\d+)\.(\d+)(?:\.(\d+))?(?:-(\S+))?")


@dataclass(frozen=True)
class KernelRelease:
    """A parsed release: the numbers that order it, and what the name says beside them."""

    text: str                  # as uname -r printed it
    major: int
    minor: int
    patch: int                 # the upstream patch level (from uname -v for a Debian ABI name when known)
    rc: int | None = None      # -rcN: before the release N.M.0
    abi: int | None = None     # Debian/Ubuntu ABI number (6.1.0-47-amd64: 47)
    flavour: str = ""          # what follows the numbers (amd64, rt-amd64, cloud-amd64, deb13-amd64)
    upstream_known: bool = True   # False for an ABI name without uname -v's upstream version

    @property
    def upstream(self) -> str:
        """The upstream version, as far as it is known: "6.1.170" (or "6.1.0-47-amd64" when not)."""
        if not self.upstream_known:
            return self.text
        return f"{self.major}.{self.minor}.{self.patch}" + (f"-rc{self.rc}" if self.rc is not None else "")


def parse(release: str, version: str | None = None) -> KernelRelease | None:
    """A `uname -r` string (with `uname -v`'s when known) parsed; None when it is not a release."""
    if not isinstance(release, str):
        return None
    found = _RELEASE.match(release.strip())
    if not found:
        return None
    major, minor, patch, rest = int(found[1]), int(found[2]), int(found[3] or 0), found[4]
    rc = abi = None
    flavour = rest.lstrip("-+.")
    if rc_match := _RC.match(rest):
        rc, flavour = int(rc_match[1]), rc_match[2].lstrip("-+.")
    elif abi_match := _ABI.match(rest):
        abi, flavour = int(abi_match[1]), abi_match[2] or ""
    known = abi is None
    if abi is not None and version:
        # Debian names 6.1.170 "6.1.0-47": the upstream patch level is only in uname -v.
        said = _DEBIAN_VERSION.search(version)
        if said and (int(said[1]), int(said[2])) == (major, minor):
            patch, known = int(said[3] or 0), True
    return KernelRelease(release, major, minor, patch, rc, abi, flavour, known)


def order_key(release: str | None, version: str | None = None) -> tuple:
    """A sort key putting releases in version order (module docstring); None and non-releases last."""
    parsed = parse(release, version) if release else None
    if parsed is None:
        return (1, (), str(release or ""))
    # An ABI name whose upstream is not known sorts by its ABI number within its major.minor;
    # one whose upstream is known, by the upstream patch level first.
    numbers = (parsed.major, parsed.minor, parsed.patch if parsed.upstream_known else -1,
               0 if parsed.rc is not None else 1, parsed.rc or 0, parsed.abi if parsed.abi is not None else -1)
    return (0, numbers, parsed.flavour + "\0" + parsed.text)


def sort_releases(releases, versions: dict[str, str] | None = None) -> list:
    """The releases in version order; `versions` maps a release to its uname -v where known."""
    versions = versions or {}
    return sorted(releases, key=lambda r: order_key(r, versions.get(r)))
