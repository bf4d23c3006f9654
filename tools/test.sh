#!/bin/sh
# Install everything the tests need (Debian packages and Python packages) and
# run the whole test suite. This is what CI runs (.ci/run).
#
#   sh tools/test.sh [PYTEST ARGS]         the full suite; a skip that hides a capability
#                                          this machine has (root, an installed tool) fails it
#   sh tools/test.sh --fast [PYTEST ARGS]  the fast lane: no Debian packages, no root, no
#                                          services, no real benchmark runs; under 2 minutes
#   sh tools/test.sh --box [PYTEST ARGS]   the simulated test box's kexec tests alone (~15 min)
set -eu
cd "$(dirname "$0")/.."

fast=0
box=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
elif [ "${1:-}" = "--box" ]; then
    box=1
    shift
fi

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
        echo "test.sh: need root to run: $*" >&2; return 1; fi
}

# Real peers the tests and benchmark scripts use: hyperfine (side-by-side
# timing), fio, git and a C compiler; chromium and its driver for the browser
# tests of `perflab report html` (tests/test_html.py, driven by selenium).
# PostgreSQL and redis-server: the tests start their own on loopback ports
# (tests/services.py); the system services are not used. linux-perf: the
# perf-stat and perf-profile monitors. mmdebstrap and qemu-utils: the simulated test box
# (tests/testbox.py). qemu-system-x86 and busybox-static: the VM executor's
# tests boot a Debian kernel (fetched below, cached) under TCG. linux-source-6.1, flex and
# bison: `perflab kernel config` makes a config in a real kernel tree (unpacked below, cached).
PACKAGES="hyperfine fio git gcc openssh-server valgrind python3-venv xfsprogs btrfs-progs rt-tests chromium chromium-driver postgresql redis-server linux-perf qemu-system-x86 qemu-utils mmdebstrap busybox-static linux-source-6.1 flex bison bc"
if [ "$fast" = 0 ]; then
    missing=""
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
fi

if [ "$fast" = 0 ]; then
    # The kernels the VM tests boot (apt-get download, cached in ~/.cache/perflab/kernels):
    # both, because the kernel-bisection test bisects from one to the other. What of the kernel
    # tree tests/test_kconfig.py configures (unpacked once, cached): its Kconfig, Makefile and
    # Kbuild files, scripts/ and the configs, 39 MB that make the same config as the whole tree
    # does, byte for byte; the whole 1.4 GB took 9-55 s here, most of it the page cache's first
    # touches (system time), against 7 s. Unpacked beside its final place and renamed, so an
    # interrupted unpack is never taken for a tree. Both run beside the
    # Python install (fetch_kernel.py needs only the standard library), which waits on the
    # package index as much as on the CPU: ~20 s less from a fresh clone (docs/testing.md).
    # A script's background jobs ignore Ctrl-C and outlive it: when test.sh stops early (a
    # failed install under set -e, Ctrl-C, kill) it stops them, waits, and removes the half
    # tree, so no tar goes on unpacking beside the next measurement.
    fetching="" unpacking="" scratch=""
    trap 'for job in $fetching $unpacking; do kill "$job" 2>/dev/null || :; done; wait
          [ -z "$scratch" ] || rm -rf "$scratch"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "${PYTHON:-python3}" tools/fetch_kernel.py --both >/dev/null &
    fetching=$!
    tree="${XDG_CACHE_HOME:-$HOME/.cache}/perflab/kconfig-tree"
    if [ ! -f "$tree/linux-source-6.1/Makefile" ] && [ -f /usr/src/linux-source-6.1.tar.xz ]; then
        mkdir -p "$tree"
        scratch=$(mktemp -d "$tree/.unpack.XXXXXX")
        (
            untar=""
            trap 'kill $untar 2>/dev/null || :; wait; exit 143' TERM     # (before tar starts)
            tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$scratch" --wildcards 'linux-source-6.1/scripts/*' \
                'linux-source-6.1/arch/x86/configs/*' 'linux-source-6.1/kernel/configs/*' '*Kconfig*' '*Makefile*' \
                '*Kbuild*' &
            untar=$!
            wait "$untar"
            rm -rf "$tree/linux-source-6.1"
            mv "$scratch/linux-source-6.1" "$tree/linux-source-6.1"
        ) &
        unpacking=$!
    fi
fi
PERFLAB_LOCK=requirements/test.txt sh tools/install.sh
if [ "$fast" = 0 ]; then
    wait "$fetching" || echo "test.sh: no kernel fetched; the VM tests will skip" >&2
    if [ -n "$unpacking" ]; then
        wait "$unpacking" || { echo "test.sh: the kernel tree did not unpack into $tree" >&2; exit 1; }
    fi
    [ -z "$scratch" ] || rm -rf "$scratch"
    fetching="" unpacking="" scratch=""
    trap - EXIT INT TERM
fi
if [ "$fast" = 1 ]; then
    # Every mark tests/conftest.py assigns (registered in pyproject.toml), deselected.
    exec .venv/bin/python -m pytest -q -n 2 \
        -m "not slow and not root and not postgres and not redis and not browser and not vm and not tool and not box" "$@"
fi
# tests/conftest.py: with this set, a skip of a root test as root, or of a tool-gated test
# whose programs are installed, is a failure.
export PERFLAB_TEST_FULL=1
# Three workers on the 2-core CI machine, idle ones stealing queued tests: much of the suite
# waits (guests booting, servers starting, planted sleeps), and no test's verdict depends on
# the load (issue 30). 658 s with -n 2 from empty caches; docs/testing.md has the figures.
# The simulated test box's tests (a Debian system built with mmdebstrap, booted under TCG, a
# kernel installed and kexec'ed: ~4 min to build the box once, then 21 s a boot and 4-5 min a
# kexec test) are a lane of their own, `--box`: in the default run they would take the whole
# suite's time budget (docs/testing.md).
if [ "$box" = 1 ]; then
    exec .venv/bin/python -m pytest -q -m box "$@"
fi
exec .venv/bin/python -m pytest -q -n "${PERFLAB_TEST_WORKERS:-3}" --dist worksteal -m "not box" "$@"
