"""Kernel variants under one tag, stored as the runner stores guest runs (issue 44): Debian's
6.1.0-56 in three flavours (amd64, cloud, rt), amd64 booted with mitigations=off, and two recipes
of perflab's minimal config (with and without CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE) that both build
6.1.192; each measured by lmbench and will-it-scale getppid1 under icount. Beside them Debian's
amd64 history 6.1.0-47 .. 6.1.0-56 (getppid1, a tag per release), and a bisection's runs on a
self-built 6.1.192-walk. Written straight into the store: no guest boots."""

from __future__ import annotations

from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.store import open_store

TAG = "e1"
METRIC = "will-it-scale.per_process_ops"
VM = {"mode": "icount", "cpus": 1, "memory": 512, "qemu_args": []}
RECIPE = {"tree": "/src/linux-source-6.1", "ref": "v6.1.192", "cc": "gcc-12"}
FAST = {**RECIPE, "fragments": [{"CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE": "y"}]}
# (job's kernel key, the run's extra parameters, uname -r, syscall.null µs, getppid1 ops/s)
VARIANTS = [
    ("debian:6.1.0-56-amd64", {}, "6.1.0-56-amd64", 0.100, 3028048.0),
    ("debian:6.1.0-56-cloud-amd64", {}, "6.1.0-56-cloud-amd64", 0.090, 3100000.0),
    ("debian:6.1.0-56-rt-amd64", {}, "6.1.0-56-rt-amd64", 0.119, 3604000.0),
    ({"image": "debian:6.1.0-56-amd64", "cmdline": "mitigations=off"}, {"cmdline": "mitigations=off"},
     "6.1.0-56-amd64", 0.060, 3900000.0),
    (RECIPE, {"kernel_build": "a1b2c3d4e5f60718"}, "6.1.192", 0.080, 3300000.0),
    (FAST, {"kernel_build": "0f1e2d3c4b5a6978"}, "6.1.192", 0.070, 3500000.0),
]
# Debian's amd64 getppid1 history: a -0.61% step at 6.1.0-50.
HISTORY = [("6.1.0-47-amd64", 3046556.0), ("6.1.0-50-amd64", 3028048.0), ("6.1.0-53-amd64", 3028048.0),
           ("6.1.0-55-amd64", 3028048.0)]
WALK = "6.1.192-walk"


def _job(benchmark: str, kernel, params: dict) -> dict:
    return {"benchmark": benchmark, **params, "kernel": kernel, "vm": dict(VM)}


def _env(release: str, cmdline: str = "", extra: dict | None = None) -> dict:
    return {"testbox": "lab1", "kernel_release": release, "guest_kernel_release": release,
            "kernel_cmdline": f"console=ttyS0 quiet {cmdline}".strip(), "vm_mode": "icount", **(extra or {})}


def _run(store, benchmark, kernel, params, release, samples, *, tag=TAG, commit=None, env_extra=None):
    env = _env(release, params.get("cmdline", ""), env_extra)
    run = store.create_run(box="lab1", environment=env, benchmark=benchmark, name=benchmark,
                           params={**params, "vm": "icount"}, tag=tag, commit=commit,
                           job=_job(benchmark, kernel, {k: v for k, v in params.items()
                                                        if k not in ("cmdline", "kernel_build")}))
    for rep in range(3):
        store.add_samples(run, rep, samples)
    store.finish_run(run, "finished")
    return run


def _wis(figure: float) -> list[Sample]:
    return [Sample(METRIC, figure, "ops/s (icount)", HIGHER_IS_BETTER, exact=True)]


def plant(path: str) -> dict[str, int]:
    """The store at `path`; returns the run ids by what they are."""
    store = open_store(path)
    ids: dict[str, int] = {}
    wis = {"test": "getppid1", "mode": "process", "nr_task": 1}
    for release, figure in HISTORY:
        ids[f"wis {release}"] = _run(store, "will-it-scale", f"debian:{release}", dict(wis), release, _wis(figure),
                                     tag=f"h-{release}")
    for kernel, extra, release, null, figure in VARIANTS:
        recipe_facts = {"kernel_recipe_commit": "c0ffee" * 6 + "abcd"} if isinstance(kernel, dict) and "tree" in kernel else {}
        name = f"{release}{' ' + extra['cmdline'] if 'cmdline' in extra else ''}"
        if isinstance(kernel, dict) and kernel.get("fragments"):
            name += " fast"
        ids[f"lmbench {name}"] = _run(store, "lmbench", kernel, dict(extra), release,
                                      [Sample("syscall.null", null, "µs (icount)", LOWER_IS_BETTER, exact=True)],
                                      env_extra=recipe_facts)
        ids[f"wis {name}"] = _run(store, "will-it-scale", kernel, {**wis, **extra}, release, _wis(figure),
                                  env_extra=recipe_facts)
    # A bisection's runs: a kernel it built (an image in its build output) at two commits.
    for i, commit in enumerate(("1" * 40, "2" * 40)):
        ids[f"walk {i}"] = _run(store, "will-it-scale", "/var/tmp/bisect/out/arch/x86/boot/bzImage", dict(wis), WALK,
                                _wis(2000000.0 + i), tag="bisect-125", commit=commit)
    return ids


def plant_head(path: str, tag: str = "e2", slower: str = "6.1.192 fast", by: float = 1.2) -> dict[str, int]:
    """The six variants of `TAG` measured again under `tag` (lmbench only), the recipes built at
    another commit (another `kernel_build` key), the variant named `slower` (a name as plant's ids
    have it: `6.1.192 fast`, `6.1.0-56-amd64 mitigations=off`) `by` times slower."""
    store = open_store(path)
    ids: dict[str, int] = {}
    for kernel, extra, release, null, _ in VARIANTS:
        recipe = isinstance(kernel, dict) and "tree" in kernel
        name = f"{release}{' ' + extra['cmdline'] if 'cmdline' in extra else ''}"
        if recipe and kernel.get("fragments"):
            name += " fast"
        params = {**extra, **({"kernel_build": extra["kernel_build"][::-1]} if recipe else {})}
        figure = null * (by if name == slower else 1.0)
        ids[f"lmbench {name}"] = _run(store, "lmbench", kernel, params, release,
                                      [Sample("syscall.null", figure, "µs (icount)", LOWER_IS_BETTER, exact=True)],
                                      tag=tag, env_extra={"kernel_recipe_commit": "d00d" * 10} if recipe else None)
    return ids
