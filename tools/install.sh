#!/bin/sh
# Install perflab into a virtual environment of this checkout (.venv).
# Needs Python >= 3.11; on Debian, python3-venv is installed when it is missing.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
        echo "install.sh: need root to run: $*" >&2; return 1; fi
}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "install.sh: perflab needs Python >= 3.11 ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -m venv .venv >/dev/null 2>&1; then
        # Debian splits venv/ensurepip into python3-venv.
        rm -rf .venv
        as_root apt-get update -qq
        as_root apt-get install -y -qq python3-venv >/dev/null
        "$PYTHON" -m venv .venv
    fi
fi
# The locked versions, every file checked against its sha256 (requirements/*.txt, made by
# tools/lock.sh; docs/dependencies.md), then perflab itself, editable, built by the locked
# setuptools: a new machine gets exactly what the tests were last green with.
LOCK=${PERFLAB_LOCK:-requirements/perflab.txt}
# uv installs them (itself locked: requirements/uv.txt): it downloads in parallel and compiles the
# bytecode on every core, 9 s against pip's 28 s from empty caches on a 2-core machine
# (docs/dependencies.md). Where uv cannot be had or cannot install (no wheel for this platform,
# a registry it cannot reach), pip installs the same lock, checked against the same hashes.
if .venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r requirements/uv.txt \
        >/dev/null 2>&1 \
   && .venv/bin/uv pip install -q --python .venv/bin/python --require-hashes --no-deps --compile-bytecode -r "$LOCK"
then
    :
else
    echo "install.sh: uv did not install $LOCK; pip installs it" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$LOCK"
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
# pip compiles what it installs from wheels, not an editable source tree: perflab's own modules
# are compiled here, once, so that no command compiles them again where bytecode is not written
# (PYTHONDONTWRITEBYTECODE=1, as on the CI machines: 40-50 ms of CPU a command, ~8%).
.venv/bin/python -m compileall -q src/perflab >/dev/null
# The cartesian plotly.js bundle `perflab report html` inlines (pinned, integrity-checked,
# never committed). Without it the report uses the plotly package's full bundle: a failure
# is one line from the script, and the install goes on.
.venv/bin/python tools/fetch_plotly.py || true
echo "perflab installed: $(.venv/bin/perflab --version)" >&2
