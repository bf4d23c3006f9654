"""Eight Debian kernels' getppid1 history under icount, for tests that build it without a VM
(tests/test_kernel_history.py, tests/test_html_kernels.py): issue 33's shape, a -0.61% step
at 6.1.0-50 and a -8.5% one at 6.12.107, run in a shuffled order."""

METRIC = "will-it-scale.per_process_ops"
# (uname -r, the upstream version uname -v names, getppid1's exact figure)
KERNELS = [
    ("6.1.0-47-amd64", "6.1.170-3", 3046556.0),
    ("6.1.0-50-amd64", "6.1.176-1", 3028048.0),
    ("6.1.0-53-amd64", "6.1.181-1", 3028048.0),
    ("6.1.0-54-amd64", "6.1.184-1", 3028048.0),
    ("6.1.0-55-amd64", "6.1.188-1", 3028048.0),
    ("6.1.0-56-amd64", "6.1.192-1", 3028048.0),
    ("6.12.107+deb13-amd64", None, 3028048.0 * 0.915),
    ("6.12.117+deb13-amd64", None, 3028048.0 * 0.915),
]
SHUFFLED = [5, 7, 1, 3, 0, 6, 2, 4]   # run order: 56 first, 50 after it, a 6.12 in the middle


def environment(release: str, upstream: str | None) -> dict:
    """A guest run's environment as the guest reports it (uname -r, and uname -v naming Debian's version)."""
    return {"testbox": "vm1", "kernel_release": release,
            "kernel_version": f"#1 SMP PREEMPT_DYNAMIC Debian {upstream} (2025-06-01)" if upstream
            else "#1 SMP PREEMPT_DYNAMIC Debian 6.12 (2025-10-01)"}
