"""The will-it-scale-class testcases: what each one does, and the facts about
them the family plug-in needs to run and record them.

Each testcase is one C program, c/<name>.c, built from the harness c/wis.h
with BUILD_FLAGS and BUILD_LIBS (see docs/will-it-scale.md for the command
line and the JSON lines it prints).
"""

from __future__ import annotations

from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent / "c"
BUILD_FLAGS: tuple[str, ...] = ("-O2",)
BUILD_LIBS: tuple[str, ...] = ("-lpthread",)

# name -> what one counted operation is, in one line
TESTCASES: dict[str, str] = {
    "page_fault1": "write fault on each page of a private anonymous 128 MB mapping (map, touch all, unmap)",
    "page_fault2": "write fault on each page of a private mapping of a per-task sparse 128 MB file",
    "page_fault3": "write fault on each page of a shared mapping of a per-task sparse 128 MB file",
    "brk1": "brk up one page and back down (2 ops); threads share one program break",
    "brk2": "brk up one page and back down above a page the task holds (2 ops)",
    "malloc1": "malloc and free of 128 MB, untouched (mmap and munmap inside glibc)",
    "malloc2": "malloc and free of 1 kB",
    "mmap1": "mmap and munmap of 128 MB of private anonymous memory, untouched",
    "mmap2": "mmap and munmap of a per-task sparse 128 MB file (private), untouched",
    "read1": "4 kB read through a per-task 1 MB file, rewinding at its end",
    "read2": "4 kB read through one shared 1 MB file, each task with its own descriptor",
    "write1": "4 kB write through a per-task file, rewinding every 1 MB",
    "pread1": "pread of 4 kB at offset 0 of a per-task file",
    "pwrite1": "pwrite of 4 kB at offset 0 of a per-task file",
    "lseek1": "lseek to offset 0 of a per-task file",
    "lseek2": "lseek to offset 0 of one shared file, each task with its own descriptor",
    "readseek1": "lseek to 0 then 4 kB read of a per-task file",
    "writeseek1": "lseek to 0 then 4 kB write of a per-task file",
    "writeseek3": "lseek then 4 kB write to the task's own page of one shared file",
    "open1": "open and close of a per-task file, all files in one directory",
    "open2": "open and close of a per-task file, each in a directory of its own",
    "unlink1": "create, close and unlink of a per-task file name, all in one directory",
    "unlink2": "create, close and unlink of a per-task file name, each in a directory of its own",
    "dup1": "dup and close of a per-task file's descriptor",
    "eventfd1": "8-byte write then read of a per-task eventfd",
    "pipe1": "1-byte write then read through a per-task pipe",
    "poll1": "poll of 1 descriptor for POLLOUT, no wait",
    "poll2": "poll of 128 descriptors for POLLOUT, no wait",
    "signal1": "SIGUSR1 sent to oneself and handled by an empty handler",
    "context_switch1": "1-byte ping-pong with a partner task over two pipes (2 ops per round trip)",
    "getppid1": "getppid system call",
    "futex1": "FUTEX_WAKE with no waiter",
    "futex2": "FUTEX_WAIT on a mismatched value (returns EAGAIN at once)",
    "lock1": "fcntl write lock and unlock of 1 byte of a per-task file (2 ops)",
    "pthread_mutex1": "lock and unlock of one mutex per process: contended by threads, not by processes",
    "sched_yield": "sched_yield system call",
    "tlb_flush1": "write, madvise(MADV_DONTNEED) and re-read of each page of a private file mapping",
}

# Each task of these runs with an uncounted partner (a second process or
# thread bound to the same CPU), so nr_task N starts 2N processes or threads.
PARTNERED: frozenset[str] = frozenset({"context_switch1"})

# The testcases whose mappings get madvise(MADV_HUGEPAGE) under `-H always`
# (the per-process stand-in for THP "always"); on the others only the
# system-wide setting changes anything (see docs/will-it-scale.md).
THP_ADVISED: frozenset[str] = frozenset({"page_fault1", "page_fault2", "page_fault3", "tlb_flush1"})
# Testcases whose loop is a cycle (map an area, one operation per page, unmap): under icount a
# sample is their second whole cycle (wis.h, wis_cycle), not a number of operations, since a
# window of part of a cycle would miss or catch its unmap.
CYCLES: frozenset[str] = frozenset({"page_fault1", "page_fault2", "page_fault3", "tlb_flush1"})

# The testcases that create files in the -D directory (files, directories).
USES_FILES: frozenset[str] = frozenset({
    "page_fault2", "page_fault3", "mmap2", "read1", "read2", "write1", "pread1", "pwrite1",
    "lseek1", "lseek2", "readseek1", "writeseek1", "writeseek3", "open1", "open2", "unlink1",
    "unlink2", "dup1", "poll1", "poll2", "lock1", "tlb_flush1",
})

MODES: tuple[str, ...] = ("process", "thread")
THP_POLICIES: tuple[str, ...] = ("always", "never", "madvise", "system")
MIN_TASKS = 1
MAX_TASKS = 65536        # the harness refuses more (-n)
