"""What a job may add to QEMU's command line (`vm.qemu_args`): the machine's shape, never a host resource.

docs/lab.md (Security) says why, docs/vm.md lists what is allowed. Checked where a job's `vm`
block is read (execution.targets.qemu.machine_of) and again before QEMU starts (VmSpec.check).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# What a job may add to QEMU's command line (docs/lab.md): the machine's shape, never a host
# resource. Each option takes one value. perflab's own options (the accelerator, -smp, -m,
# the kernel, the consoles, the 9p share, the disks) are set from the job's recorded keys and
# may not be overridden; anything that opens a host file, socket, port or program (-pidfile
# deletes its file at exit, -fsdev/-virtfs share a host directory writable, -monitor/-qmp
# expose QEMU's monitor, -chardev/-netdev/-drive/-object/-plugin open host resources) is
# refused, whatever a job file or an imported run says.
QEMU_ALLOWED = ("-machine", "-M", "-cpu", "-device", "-global", "-rtc", "-overcommit")
QEMU_OURS = {"-accel": "vm.mode", "-enable-kvm": "vm.mode", "-icount": "vm.mode", "-smp": "vm.cpus",
             "-m": "vm.memory", "-kernel": "kernel", "-initrd": "kernel", "-append": "the kernel command line"}
# Keys of an allowed option's value that name a host resource or one of perflab's own backends.
QEMU_REFUSED_KEYS = ("chardev", "fsdev", "drive", "netdev", "file", "path", "filename", "script", "downscript",
                     "socket", "sock", "fd", "fds", "vhostfd", "vhostfds", "memory-backend", "memdev", "romfile",
                     "host", "port", "accel", "kernel", "initrd", "append", "dtb", "dumpdtb", "firmware", "bios",
                     "pflash0", "pflash1", "audiodev", "tpmdev", "rootdir", "evdev", "hidraw", "sysfsdev")
# The devices a job may add (docs/vm.md): emulated ones with no host backend. Not `loader` (it
# reads a host file into guest memory), no vhost-* (a host kernel device: /dev/vhost-vsock ...),
# no vfio-* or *-host passthrough: whatever opens something of the host is left out.
QEMU_DEVICES = frozenset((
    "virtio-rng-pci", "virtio-balloon-pci", "pvpanic", "isa-debug-exit", "i6300esb", "ib700",
    "intel-iommu", "amd-iommu", "virtio-iommu-pci", "pci-bridge", "pcie-pci-bridge", "pcie-root-port",
    "qemu-xhci", "usb-ehci", "piix3-usb-uhci", "usb-kbd", "usb-mouse", "usb-tablet",
    "virtio-keyboard-pci", "virtio-mouse-pci", "virtio-tablet-pci", "virtio-serial-pci",
    "e1000", "e1000e", "rtl8139", "virtio-net-pci", "virtio-scsi-pci", "lsi53c895a", "megasas", "ich9-ahci",
    "VGA", "virtio-vga", "virtio-gpu-pci", "bochs-display", "edu", "pci-testdev",
))
# `-global DRIVER.PROPERTY=VALUE` (or driver=,property=,value=) sets a default of every device of
# DRIVER, perflab's own included (the 9p device, the consoles, a `loader`'s file): only these
# pairs, none naming a file, with a plain word or number as the value.
QEMU_GLOBALS = frozenset((
    ("kvm-pit", "lost_tick_policy"), ("mc146818rtc", "lost_tick_policy"),
    ("PIIX4_PM", "disable_s3"), ("PIIX4_PM", "disable_s4"), ("ICH9-LPC", "disable_s3"), ("ICH9-LPC", "disable_s4"),
    ("i440FX-pcihost", "pci-hole64-size"), ("q35-pcihost", "pci-hole64-size"),
    ("virtio-rng-pci", "max-bytes"), ("virtio-rng-pci", "period"),
))
_GLOBAL_VALUE = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")


def _options(value: str) -> list[tuple[str, str | None]]:
    """A QEMU option value (a,b=c,...) as (key, value) pairs; a bare word has value None."""
    return [(k.strip(), v if sep else None) for k, sep, v in (part.partition("=") for part in value.split(","))]


def _global_refusal(value: str) -> str | None:
    pairs = _options(value)
    keys = dict(pairs)
    if "driver" in keys or "property" in keys:
        if set(keys) - {"driver", "property", "value"} or len(pairs) != 3:
            return f"-global {value!r}: expected driver=D,property=P,value=V"
        driver, prop, setting = keys["driver"], keys["property"], keys["value"]
    else:
        name, sep, setting = value.partition("=")
        driver, dot, prop = name.partition(".")
        if not (sep and dot):
            return f"-global {value!r}: expected DRIVER.PROPERTY=VALUE"
    if (driver, prop) not in QEMU_GLOBALS:
        allowed = ", ".join(f"{d}.{p}" for d, p in sorted(QEMU_GLOBALS))
        return f"-global {value!r}: {driver}.{prop} is not one a job may set (allowed: {allowed}; docs/vm.md)"
    if not _GLOBAL_VALUE.fullmatch(setting or ""):
        return f"-global {value!r}: the value {setting!r} is not a plain word or number"
    return None


def qemu_args_refusal(args: Sequence[str]) -> str | None:
    """Why `args` may not be added to QEMU's command line, or None when they may."""
    args = [str(a) for a in args]
    i = 0
    while i < len(args):
        option = args[i]
        name = "-" + option.lstrip("-") if option.startswith("-") else option
        if name in QEMU_OURS:
            return f"{option!r} is set by perflab from {QEMU_OURS[name]}; set that instead"
        if name not in QEMU_ALLOWED:
            return (f"{option!r} is not allowed: a job may add only {', '.join(QEMU_ALLOWED)} "
                    f"(each with a value naming no host file, socket or backend; docs/lab.md)")
        if i + 1 >= len(args):
            return f"{option!r} needs a value"
        value = args[i + 1]
        if value.lstrip().startswith("{") or ",," in value:
            # QEMU reads a JSON -device, and ",," as a comma inside a value: neither is checked here.
            return f"{option} {value!r}: write the value as key=value,... without JSON or doubled commas"
        keys = {part.split("=", 1)[0].strip().lower().rsplit(".", 1)[-1] for part in value.split(",")}
        bad = sorted(keys & set(QEMU_REFUSED_KEYS))
        if "/" in value or bad or value.strip().lower() in ("help", "?") or "\n" in value:
            what = f"key {bad[0]!r}" if bad else "a path" if "/" in value else "no machine"
            return f"{option} {value!r} names {what}: an added option may name no host resource and nothing perflab sets"
        if name == "-global":
            why = _global_refusal(value)
            if why:
                return why
        if name == "-device":
            pairs = _options(value)
            driver = dict(pairs).get("driver") or (pairs[0][0] if pairs[0][1] is None else "")
            if driver not in QEMU_DEVICES:
                return (f"-device {value!r}: device {driver!r} is not one a job may add (no loader, vhost, vfio or "
                        f"host device; allowed: {', '.join(sorted(QEMU_DEVICES))}; docs/vm.md)")
        i += 2
    return None
