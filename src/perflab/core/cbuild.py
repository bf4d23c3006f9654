"""Compile a benchmark's C program on demand with the machine's own compiler.

The binary is cached under $XDG_CACHE_HOME/perflab/cbuild/ (default
~/.cache/perflab/cbuild/), keyed by a hash of the program's source, every
header it includes with #include "..." (followed through the headers, shared
ones in other directories too, and the shared runtime core/c/perflab.h,
which is on every build's include path), the headers beside it, the compiler's full
`--version` output and the flags: a
new compiler, a changed flag or an edited source gets a new binary, an
unchanged one is reused. A binary is compiled to a temporary name and renamed
into place, so a concurrent or interrupted build never leaves a half-written
file where a later run would find it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from perflab.core import paths
from perflab.core.errors import PerflabError

DEFAULT_FLAGS: tuple[str, ...] = ("-O2",)
# A shared object perflab loads into a tool of its own (the QEMU plugin): built with the
# machine's compiler as it is, never with a job's flags or -static.
SHARED_FLAGS: tuple[str, ...] = ("-O2", "-shared", "-fPIC", "-fvisibility=hidden")
# The C runtime every program shares (perflab.h): on every build's include path.
RUNTIME_DIR = Path(__file__).resolve().parent / "c"
COMPILE_TIMEOUT = 300
STDERR_LINES = 5


class BuildError(PerflabError):
    """The C program could not be built: no compiler, or the compile failed."""

    def __init__(self, program: str, message: str):
        super().__init__(f"{program}: {message}")
        self.program = program
        self.detail = message


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]    # $CC split like a shell would, e.g. ("gcc", "-m64")
    path: str                   # the executable it resolves to
    version: str                # first line of `--version`
    version_full: str           # all of it (part of the cache key)

    @property
    def display(self) -> str:
        return shlex.join(self.command)


_compilers: dict[str, Compiler] = {}

# Flags every build within `static_programs()` adds: a program for a VM guest, which has no C library.
_extra_flags: ContextVar[tuple[str, ...]] = ContextVar("perflab_cbuild_extra_flags", default=())


@contextmanager
def static_programs() -> Iterator[None]:
    """Within: every program is linked -static (part of its cache key), to run in a VM guest."""
    token = _extra_flags.set(("-static",))
    try:
        yield
    finally:
        _extra_flags.reset(token)


# The compiler and extra flags an atomic job chose (its `cc:` and `cflags:` keys), within `compiling_with()`.
_chosen: ContextVar[tuple[str | None, tuple[str, ...]]] = ContextVar("perflab_cbuild_chosen", default=(None, ()))


@contextmanager
def compiling_with(cc: str | None, cflags: str | None = None) -> Iterator[None]:
    """Within: programs are built with `cc` (over $CC) and `cflags` added after their own flags
    (so `-O1` there wins over a family's `-O2`: the compiler takes the last -O). Part of the cache key."""
    token = _chosen.set((cc or None, tuple(split_flags(cflags))))
    try:
        yield
    finally:
        _chosen.reset(token)


def split_flags(cflags: str | None) -> list[str]:
    """`cflags` as words, split as a shell would; BuildError when it cannot be."""
    try:
        return shlex.split(cflags or "")
    except ValueError as e:
        raise BuildError("cc", f"cannot parse cflags {cflags!r}: {e}") from None


def cc_command() -> str:
    """The compiler in force: the job's `cc:`, else $CC, else cc."""
    return _chosen.get()[0] or os.environ.get("CC") or "cc"


# Debian/Ubuntu packages of compilers whose package is not named after the command.
PACKAGES = {"cc": "gcc", "c99": "gcc", "c89": "gcc", "clang": "clang", "icx": "intel-oneapi-compiler-dpcpp-cpp"}


def package_of(command: str) -> str:
    """The package that installs a compiler command (gcc-13 -> gcc-13, cc -> gcc)."""
    name = os.path.basename(command)
    return PACKAGES.get(name, name)


def compiler(cc: str | None = None) -> Compiler:
    """The compiler named by `cc` (default $CC, else cc); BuildError when it is missing."""
    cc = cc or cc_command()
    if cc in _compilers:
        return _compilers[cc]
    try:
        words = tuple(shlex.split(cc))
    except ValueError as e:
        raise BuildError("cc", f"cannot parse $CC {cc!r}: {e}") from None
    if not words:
        raise BuildError("cc", "$CC is empty")
    path = shutil.which(words[0])
    if path is None:
        raise BuildError("cc", f"C compiler {words[0]!r} not found: install it (package {package_of(words[0])}, "
                               f"e.g. apt-get install {package_of(words[0])}) or choose another (cc: key, $CC)")
    try:
        out = subprocess.run([path, *words[1:], "--version"], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError("cc", f"C compiler {cc!r} does not run: {e}") from None
    full = (out.stdout or out.stderr).strip()
    first = full.splitlines()[0].strip() if full else "unknown"
    found = Compiler(words, path, first, full)
    _compilers[cc] = found
    return found


_INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)


def local_includes(source: Path, search: list[Path]) -> list[Path]:
    """Every file `source` includes with #include "...", transitively (what the build depends on).

    A name is looked up beside the including file first, then in `search`, as the compiler does with -I.
    """
    found: list[Path] = []
    pending = [source]
    while pending:
        current = pending.pop()
        try:
            text = current.read_bytes()
        except OSError:
            continue
        for name in _INCLUDE.findall(text):
            rel = name.decode(errors="replace")
            for base in [current.parent, *search]:
                candidate = (base / rel).resolve()
                if candidate.is_file():
                    if candidate not in found:
                        found.append(candidate)
                        pending.append(candidate)
                    break
    return found


def cache_dir() -> Path:
    return paths.cache_home() / "cbuild"


def build(program: str, source_dir: Path, *, cc: str | None = None,
          flags: tuple[str, ...] = DEFAULT_FLAGS, libs: tuple[str, ...] = ()) -> Path:
    """Path of an executable for `source_dir/<program>.c`, compiling it if needed.

    Every *.h in source_dir is part of the key (the programs share a header).
    Raises BuildError naming the program when the compiler is missing or the
    compile fails; the message carries the first lines of the compiler's errors.
    """
    if "-shared" not in flags:
        flags = (*flags, *_chosen.get()[1], *_extra_flags.get())
    source = source_dir / f"{program}.c"
    if not source.is_file():
        raise BuildError(program, f"no source {source}")
    try:
        comp = compiler(cc)
    except BuildError as e:
        raise BuildError(program, e.detail) from None

    digest = hashlib.sha256()
    sources = [source, *sorted(source_dir.glob("*.h"))]
    for header in local_includes(source, [source_dir, RUNTIME_DIR]):
        if header not in sources:
            sources.append(header)
    for part in (comp.path, comp.display, comp.version_full, "\0".join(flags), "\0".join(libs)):
        digest.update(part.encode())
        digest.update(b"\0")
    for path in sources:
        digest.update(str(path.relative_to(source_dir) if path.is_relative_to(source_dir) else path).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    key = digest.hexdigest()[:20]

    directory = cache_dir()
    target = directory / f"{program}-{key}"
    if os.access(target, os.X_OK):
        return target
    directory.mkdir(parents=True, exist_ok=True)
    # Unique per process and thread: two threads building the same program (two guests booted
    # side by side) must not rename each other's output away. A killed build's is swept.
    tmp = paths.temporary(target)
    cmd = [comp.path, *comp.command[1:], *flags, "-I", str(source_dir), "-I", str(RUNTIME_DIR), "-o", str(tmp), str(source), *libs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise BuildError(program, f"{comp.display} did not finish compiling in {COMPILE_TIMEOUT} s") from None
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise BuildError(program, f"cannot run {comp.display}: {e.strerror or e}") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = [line for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
        detail = " | ".join(lines[:STDERR_LINES]) or "no message"
        raise BuildError(program, f"compile failed ({comp.display} {' '.join(flags)} exited {proc.returncode}): {detail}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    return target
