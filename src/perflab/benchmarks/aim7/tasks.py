"""The aim7-class tasks and workfiles: what each task does, and how a workfile's
weights become the task invocations of one simulated user.

Each task is a C function in c/aim7.c named as AIM7 names it; docs/aim7.md says
what each one does. A workfile is a set of tasks with weights (AIM's "hits");
`test:` names one task (LKP's habit: a workfile of one task, 10 hits) or a mix.
"""

from __future__ import annotations

from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent / "c"
PROGRAM = "aim7"
HELPER = "aim7_true"      # the program exec_test loads
BUILD_FLAGS: tuple[str, ...] = ("-O2",)
BLOCK = 1024              # AIM's disk block, bytes

# name -> what one invocation does (one line). The order is the C program's.
TASKS: dict[str, str] = {
    "disk_wrt": "write a new file of file_size sequentially in 1 KiB blocks, then remove it",
    "disk_rd": "write a new file, then read it back sequentially",
    "disk_rr": "write a new file, then read as many 1 KiB blocks from random places in it",
    "disk_rw": "write a new file, then write as many 1 KiB blocks at random places in it",
    "disk_cp": "copy the run's shared source file (file_size) into a new file, then remove it",
    "sync_disk_rw": "as disk_rw on half the blocks, the random writes through O_SYNC",
    "sync_disk_wrt": "write half the blocks to a new file opened O_SYNC",
    "sync_disk_cp": "copy half the source file into a new file opened O_SYNC",
    "creat-clo": "create (truncating) and close one file name 1000 times, then remove it",
    "link_test": "give a file 7 more names, then remove and re-make each name 9 times round",
    "page_test": "raise the break 1 MiB; 100 times lower it 16 pages and raise it a page at a time, "
                 "writing to each new page",
    "brk_test": "as page_test without touching the pages, 1000 times",
    "exec_test": "fork a child that execs a program doing nothing, and wait for it; 5 times",
    "fork_test": "fork a child that exits at once, and wait for it; 100 times",
    "shared_memory": "100 times: copy a message into a System V shared segment and back, "
                     "each copy under a System V semaphore",
}

DISK_TASKS = ("disk_wrt", "disk_rd", "disk_rr", "disk_rw", "disk_cp", "sync_disk_rw", "sync_disk_wrt", "sync_disk_cp")
# Tasks whose loop counts `scale` multiplies (the disk tasks follow file_size instead).
SCALED_TASKS = ("creat-clo", "link_test", "page_test", "brk_test", "exec_test", "fork_test", "shared_memory")

SINGLE_TASK_HITS = 10     # LKP writes a one-task workfile as "10 <task>"

# Named mixes: workfile name -> {task: hits}.
MIXES: dict[str, dict[str, int]] = {
    "mixed": {name: 1 for name in TASKS},
    "disk": {name: 1 for name in DISK_TASKS},
    "process": {"page_test": 1, "brk_test": 1, "exec_test": 1, "fork_test": 1, "shared_memory": 1},
}
ALIASES = {"default": "mixed"}

TESTS = (*TASKS, *MIXES, *ALIASES)


def canonical(test: str) -> str:
    """The workfile name as stored ('default' is 'mixed'); ValueError listing the valid names."""
    test = ALIASES.get(test, test)
    if test not in TASKS and test not in MIXES:
        raise ValueError(f"unknown task or mix {test!r}; valid tasks: {', '.join(TASKS)}; "
                         f"mixes: {', '.join((*MIXES, *ALIASES))}")
    return test


def workfile(test: str) -> dict[str, int]:
    """{task: hits} of a test name (canonical or alias)."""
    test = canonical(test)
    return dict(MIXES[test]) if test in MIXES else {test: SINGLE_TASK_HITS}


def per_user(test: str, jobs: int | None) -> dict[str, int]:
    """How many times one user runs each task: the workfile once, or `jobs` invocations
    shared out by the weights (largest remainder; ties go to the earlier task)."""
    hits = workfile(test)
    if jobs is None:
        return hits
    total = sum(hits.values())
    exact = {t: jobs * h / total for t, h in hits.items()}
    counts = {t: int(v) for t, v in exact.items()}
    left = jobs - sum(counts.values())
    for t in sorted(hits, key=lambda t: -(exact[t] - counts[t]))[:left]:
        counts[t] += 1
    return counts
