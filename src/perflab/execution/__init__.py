"""How a benchmark process is started and where: the executor (C launcher, process group,
timeout, rusage), the interrupt flag, work directories and per-run filesystems.

The bottom of the measuring side: families, monitors and the runner's loop build on it.
"""
