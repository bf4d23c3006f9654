"""The VM executor: boot a kernel in QEMU and run benchmark processes inside it.

    with boot(VmSpec(kernel="vmlinuz", mode="icount")) as guest:
        result = guest.execute(ProcessSpec(["/bin/true"]))   # a ProcessResult, as on the host
        guest.facts                                          # guest kernel, QEMU, mode: for the environment

kernel: fetching Debian kernels; initramfs: the guest's root (agent, launcher, busybox);
machine: QEMU, the agent's protocol, faults. docs/vm.md has the design.
"""

from perflab.execution.vm.machine import MODES, Guest, VmError, VmSpec, boot, qemu_args_refusal

__all__ = ["MODES", "Guest", "VmError", "VmSpec", "boot", "qemu_args_refusal"]
