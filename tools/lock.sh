#!/bin/sh
# Make the lock files every install of this checkout uses (docs/dependencies.md):
#
#   requirements/test.txt     perflab, its test and postgres extras, and its build backend
#                             (tools/test.sh, CI)
#   requirements/perflab.txt  perflab and its build backend (tools/install.sh), the same
#                             versions as test.txt (resolved with it as a constraint)
#   requirements/uv.txt       uv, which tools/install.sh installs the two with
#
# Both are exact versions with the sha256 of every file PyPI holds for them, resolved once
# for every platform and Python >= 3.11 with one version per package (uv's universal
# resolution, fewest forks), so a machine on Python 3.12 installs what CI was green with.
#
#   sh tools/lock.sh              add what pyproject.toml gained, keep every other pin
#   sh tools/lock.sh --upgrade    move every pin to the newest release pyproject.toml allows
#
# Then `sh tools/test.sh` is the check that the new lock is safe, and the lock is committed
# alone. uv itself is pinned here and installed in a throw-away virtualenv.
set -eu
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
PYTHON=${PYTHON:-python3}

upgrade=""
case "${1:-}" in
    "") ;;
    --upgrade) upgrade="--upgrade" ;;
    *) echo "lock.sh: unknown argument '$1' (expected nothing or --upgrade)" >&2; exit 2 ;;
esac

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$PYTHON" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q "uv==$UV_VERSION"
uv="$scratch/venv/bin/uv"
common="--universal --fork-strategy fewest --python-version 3.11 --generate-hashes --quiet"
# The build backend (pyproject.toml's build-system.requires) is locked too: the editable
# install runs without build isolation, from these pins.
"$PYTHON" - "$scratch/build.in" <<'PY'
import sys, tomllib
with open("pyproject.toml", "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
open(sys.argv[1], "w").write("# pyproject.toml's build-system.requires, written by tools/lock.sh\n"
                           + "".join(r + "\n" for r in requires))
PY
cp "$scratch/build.in" requirements/build.in
# shellcheck disable=SC2086
"$uv" pip compile pyproject.toml requirements/build.in $common $upgrade --extra test --extra postgres \
    --custom-compile-command "sh tools/lock.sh" -o requirements/test.txt
# shellcheck disable=SC2086
"$uv" pip compile pyproject.toml requirements/build.in $common -c requirements/test.txt \
    --custom-compile-command "sh tools/lock.sh" -o requirements/perflab.txt
# uv itself, with the sha256 of every file of its release: tools/install.sh installs the locks with
# it (parallel downloads and bytecode compiles: ~9 s against pip's ~28 s from empty caches).
printf 'uv==%s\n' "$UV_VERSION" > "$scratch/uv.in"
# shellcheck disable=SC2086
"$uv" pip compile "$scratch/uv.in" $common --custom-compile-command "sh tools/lock.sh" -o requirements/uv.txt
echo "lock.sh: requirements/test.txt $(grep -c '==' requirements/test.txt) pins," \
     "requirements/perflab.txt $(grep -c '==' requirements/perflab.txt)" >&2
