"""The lock files agree with pyproject.toml, with each other and with what is installed.

requirements/test.txt and requirements/perflab.txt are made by tools/lock.sh from
pyproject.toml (docs/dependencies.md). A dependency added to, removed from or narrowed in
one and not the other fails here, naming the package and the file to fix.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
TEST_LOCK = ROOT / "requirements" / "test.txt"
RUNTIME_LOCK = ROOT / "requirements" / "perflab.txt"
BUILD_IN = ROOT / "requirements" / "build.in"
TEST_EXTRAS = ("test", "postgres")   # tools/lock.sh --extra test --extra postgres

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


class Pin:
    def __init__(self, name: str, version: str, marker: str | None, line: int):
        self.name, self.version, self.marker, self.line = name, version, marker, line
        self.hashes: list[str] = []
        self.via: list[str] = []

    def applies(self) -> bool:
        return self.marker is None or Requirement(f"x; {self.marker}").marker.evaluate()


def read_lock(path: Path) -> dict[str, list[Pin]]:
    """name -> its pins (one per marker fork) with hashes and 'via' annotations."""
    pins: dict[str, list[Pin]] = {}
    current: Pin | None = None
    in_via = False
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        match = PIN.match(raw)
        if match:
            current = Pin(canonicalize_name(match[1]), match[2], match[3], number)
            pins.setdefault(current.name, []).append(current)
            in_via = False
        elif line.startswith("--hash=sha256:") and current is not None:
            current.hashes.append(line.split(":", 1)[1].rstrip(" \\"))
        elif line.startswith("# via") and current is not None:
            rest = line.removeprefix("# via").strip()
            in_via = not rest
            if rest:
                current.via.append(rest)
        elif in_via and line.startswith("#") and current is not None:
            current.via.append(line.lstrip("# ").strip())
        elif line and not line.startswith("#"):
            raise AssertionError(f"{path.relative_to(ROOT)}:{number}: not a pin, hash or comment: {raw!r}")
    return pins


def pyproject_requirements() -> tuple[list[Requirement], list[Requirement], list[Requirement]]:
    """(runtime dependencies, the locked extras' dependencies, build-system.requires)."""
    data = tomllib.loads(PYPROJECT.read_text())
    runtime = [Requirement(r) for r in data["project"]["dependencies"]]
    extras = [Requirement(r) for e in TEST_EXTRAS for r in data["project"]["optional-dependencies"][e]]
    build = [Requirement(r) for r in data["build-system"]["requires"]]
    return runtime, extras, build


def direct(pin: Pin) -> bool:
    return any(v in ("perflab (pyproject.toml)", "-r requirements/build.in") for v in pin.via)


def _satisfied(requirement: Requirement, lock: dict[str, list[Pin]], where: Path) -> list[str]:
    name = canonicalize_name(requirement.name)
    if requirement.marker is not None and not requirement.marker.evaluate():
        return []
    if name not in lock:
        return [f"{requirement} is in pyproject.toml but not in {where.relative_to(ROOT)} (run sh tools/lock.sh)"]
    return [f"{where.relative_to(ROOT)}:{p.line}: {p.name}=={p.version} does not satisfy pyproject.toml's "
            f"{requirement} (run sh tools/lock.sh)"
            for p in lock[name] if not requirement.specifier.contains(p.version, prereleases=True)]


def test_every_pyproject_dependency_is_locked_at_a_version_it_allows():
    runtime, extras, build = pyproject_requirements()
    test_lock, runtime_lock = read_lock(TEST_LOCK), read_lock(RUNTIME_LOCK)
    problems = []
    for requirement in runtime + extras + build:
        problems += _satisfied(requirement, test_lock, TEST_LOCK)
    for requirement in runtime + build:
        problems += _satisfied(requirement, runtime_lock, RUNTIME_LOCK)
    assert not problems, "\n".join(problems)


def test_every_direct_pin_is_still_a_pyproject_dependency():
    runtime, extras, build = pyproject_requirements()
    allowed = {
        TEST_LOCK: {canonicalize_name(r.name) for r in runtime + extras + build},
        RUNTIME_LOCK: {canonicalize_name(r.name) for r in runtime + build},
    }
    problems = [f"{path.relative_to(ROOT)}:{pin.line}: {name} is pinned as a direct dependency but "
                f"pyproject.toml no longer asks for it{' there' if path is RUNTIME_LOCK else ''} (run sh tools/lock.sh)"
                for path, names in allowed.items()
                for name, pins in read_lock(path).items() for pin in pins
                if direct(pin) and name not in names]
    assert not problems, "\n".join(problems)


def test_every_pin_is_exact_and_hashed_and_the_two_locks_agree():
    test_lock, runtime_lock = read_lock(TEST_LOCK), read_lock(RUNTIME_LOCK)
    problems = [f"{path.relative_to(ROOT)}:{pin.line}: {name}=={pin.version} has no --hash"
                for path, lock in ((TEST_LOCK, test_lock), (RUNTIME_LOCK, runtime_lock))
                for name, pins in lock.items() for pin in pins if not pin.hashes]
    for name, pins in runtime_lock.items():
        theirs = {(p.version, p.marker) for p in test_lock.get(name, [])}
        for pin in pins:
            if (pin.version, pin.marker) not in theirs:
                problems.append(f"{RUNTIME_LOCK.relative_to(ROOT)}:{pin.line}: {name}=={pin.version} is not what "
                                f"{TEST_LOCK.relative_to(ROOT)} pins ({sorted(theirs) or 'nothing'}): the tests "
                                "would not run what users install (run sh tools/lock.sh)")
    assert len(test_lock) > 20 and len(runtime_lock) > 20, "a lock file lost its pins"
    assert not problems, "\n".join(problems)


def test_the_build_input_is_pyprojects_build_system():
    _, _, build = pyproject_requirements()
    listed = [line.strip() for line in BUILD_IN.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert listed == [str(r) for r in build], \
        f"{BUILD_IN.relative_to(ROOT)} says {listed}, pyproject.toml's build-system.requires {[str(r) for r in build]}" \
        " (run sh tools/lock.sh)"


def _closure(roots: list[Requirement]) -> dict[str, set[str]]:
    """Every distribution the roots need on this interpreter (installed metadata) -> who needs it."""
    environment = default_environment()

    def wanted(requirement: Requirement, extras: set[str]) -> bool:
        return requirement.marker is None or any(
            requirement.marker.evaluate({**environment, "extra": e}) for e in {"", *extras})

    needed: dict[str, set[str]] = {}
    expanded: set[tuple[str, frozenset]] = set()
    todo = [(r, "pyproject.toml") for r in roots if wanted(r, set())]
    while todo:
        requirement, parent = todo.pop()
        name = canonicalize_name(requirement.name)
        needed.setdefault(name, set()).add(parent)
        key = (name, frozenset(requirement.extras))
        if key in expanded:
            continue
        expanded.add(key)
        try:
            requires = importlib.metadata.requires(requirement.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue   # the caller reports it: not in the lock, or not installed
        todo += [(child, name) for child in map(Requirement, requires) if wanted(child, requirement.extras)]
    return needed


def test_the_lock_is_complete_and_installed_as_pinned():
    """What the test environment has is what requirements/test.txt pins (tools/test.sh installed it),
    and every distribution pyproject.toml's dependencies need here is pinned there."""
    runtime, extras, build = pyproject_requirements()
    lock = read_lock(TEST_LOCK)
    needed = _closure(runtime + extras)
    problems = [f"{name} (needed by {', '.join(sorted(who))}) is not in {TEST_LOCK.relative_to(ROOT)} "
                "(run sh tools/lock.sh)" for name, who in sorted(needed.items()) if name not in lock]
    for name, pins in sorted(lock.items()):
        for pin in pins:
            if not pin.applies():
                continue
            try:
                installed = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                problems.append(f"{TEST_LOCK.relative_to(ROOT)}:{pin.line}: {name}=={pin.version} is not installed "
                                "(install with sh tools/test.sh)")
                continue
            if installed != pin.version:
                problems.append(f"{TEST_LOCK.relative_to(ROOT)}:{pin.line}: {name}=={pin.version} is pinned, "
                                f"{installed} is installed (install with sh tools/test.sh)")
    assert not problems, "\n".join(problems)
