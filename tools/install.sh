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
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".${PERFLAB_EXTRAS:-}"
# The cartesian plotly.js bundle `perflab report html` inlines (pinned, integrity-checked,
# never committed). Without it the report uses the plotly package's full bundle: a failure
# is one line from the script, and the install goes on.
.venv/bin/python tools/fetch_plotly.py || true
echo "perflab installed: $(.venv/bin/perflab --version)" >&2
