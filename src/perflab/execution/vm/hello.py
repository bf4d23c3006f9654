"""What a guest says of itself (the agent's HELLO: execution/vm/c/agent.c), as a run records it."""

from __future__ import annotations


def settle_facts(said: dict) -> dict:
    """What the agent's wait for a quiet kernel (its `settle` setup line) took, as the run records it."""
    seconds = int(said.get("settle_ns") or 0) / 1e9
    spread = int(said.get("settle_spread_ppm") or -1)
    how = (f"{'settled' if said['settle'] == 'settled' else 'NOT settled'} after {seconds:.3f} s of guest time, "
           f"{said.get('settle_rounds', '?')} rounds of getppid; the last agreed within "
           + (f"{spread / 1e4:.4f}%" if spread >= 0 else "n/a"))
    return {"vm_settle": how, "vm_settled": "yes" if said["settle"] == "settled" else "no",
            "vm_settle_seconds": f"{seconds:.3f}"}


def boot_phase_facts(said: dict) -> dict:
    """Where a boot's time went by the guest's own clock (the agent's init_ns and hello_ns):
    the kernel's part up to perflab's init, then the agent's (modules, mounts, settle) up to
    HELLO. Instruction-time under icount: the same on every boot of one kernel and initramfs."""
    try:
        init, hello = int(said.get("init_ns") or 0) / 1e9, int(said.get("hello_ns") or 0) / 1e9
    except ValueError:
        return {}
    if not 0 < init <= hello:
        return {}
    facts = {"vm_boot_guest": f"kernel to /init {init:.3f} s, /init to HELLO {hello - init:.3f} s (guest clock)"}
    # The agent's setup lines, each "LINE NS" (agent.c, setup_times): the modules' part of it.
    took = [line.rpartition(" ") for line in said.get("setup_times", "").split("|") if line]
    loads = [int(ns) for line, _, ns in took if line.startswith("insmod ") and ns.isdigit()]
    if loads:
        facts["vm_boot_modules"] = f"{len(loads)} modules loaded in {sum(loads) / 1e9:.3f} s (guest clock)"
    return facts


def environment_facts(facts: dict) -> dict:
    """The guest's facts, over the host's where the run's environment names the system under test.

    A guest run measured the guest's kernel: `kernel_release` (what `compare kernel=...`
    selects by), `kernel_version`, the CPU model, cores and threads and the memory are the guest's;
    the host's stay beside them as host_*.
    """
    out = dict(facts)
    for key, value in (("kernel_release", facts.get("guest_kernel_release")),
                       ("kernel_version", facts.get("guest_kernel_version")),
                       ("cpu_model", facts.get("vm_cpu_model")), ("cpu_threads", int(facts.get("vm_cpus") or 0)),
                       # QEMU's -smp N: N single-threaded vCPUs, so as many cores as threads.
                       ("cpu_cores", int(facts.get("vm_cpus") or 0)),
                       ("memory_kib", int(facts.get("vm_memory_mib") or 0) * 1024)):
        if value:
            out[key] = value
    return out
