"""A simulated test box: a QEMU guest that plays a kexec-capable machine reached over SSH.

Used by tests/test_kexec_box.py and tools/bench/box.py (docs/lab.md, "A simulated test box"),
which also take from here a kernel recipe the box boots (box_recipe, BOX_FRAGMENT).

The box is a Debian 12 root file system made by mmdebstrap from the mirror apt uses (openssh-
server, kexec-tools, systemd, initramfs-tools for the kernels installed on it), written into an
ext4 image by `mke2fs -d`, with a key of ours in root's authorized_keys. It boots Debian's
6.1.0-47 kernel (perflab's cached one) through QEMU's -kernel, with a small initramfs of
busybox and the virtio/ext4 modules that mounts /dev/vda and hands over to systemd: a reboot
of the box (QEMU's reset) comes back on that default kernel, as a real box's firmware would.

Built once, cached under ~/.cache/perflab/box/KEY/ (KEY: a hash of the builder's inputs); each
boot runs on a qcow2 overlay of the image, so a box starts clean. Its power-cycle command is
`python3 tests/testbox.py reset SOCKET` (QEMU monitor `system_reset`), its console the serial
output file.

    python3 tests/testbox.py build            build (or find) the image; print its directory
    python3 tests/testbox.py reset SOCKET     system_reset through a QEMU monitor socket
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SUITE = "bookworm"
PACKAGES = ("openssh-server", "kexec-tools", "systemd-sysv", "initramfs-tools", "udev", "iproute2", "zstd")
DEFAULT_KERNEL = "linux-image-6.1.0-47-amd64-unsigned"
DISK_MB = 2560
VERSION = "4"          # bump when what build() writes changes (_customize, _initrd): part of the cache key
CMDLINE = "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet"


def mirror() -> str:
    """The Debian mirror apt uses here (its deb822 sources, else sources.list), else deb.debian.org."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]:
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                words = line.split()
                if line.startswith("URIs:") and len(words) > 1 and "security" not in words[1]:
                    return words[1]
                if words[:1] == ["deb"] and len(words) > 2 and "security" not in words[1]:
                    return words[2] if words[1].startswith("[") else words[1]
    return "http://deb.debian.org/debian"


def cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perflab"


def shared_cache_home() -> Path:
    # The tests point XDG_CACHE_HOME at a per-session directory for perflab's builds; the box image
    # (minutes to make) and Debian's kernels stay in the user's own cache.
    return Path.home() / ".cache" / "perflab"


def kernel_dir(package: str = DEFAULT_KERNEL) -> Path:
    return shared_cache_home() / "kernels" / package


def missing() -> str | None:
    """Why a box cannot be built or booted here, or None."""
    for tool, pkg in (("mmdebstrap", "mmdebstrap"), ("mke2fs", "e2fsprogs"), ("qemu-system-x86_64", "qemu-system-x86"),
                      ("qemu-img", "qemu-utils"), ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian package {pkg})"
    if os.geteuid() != 0:
        return "mmdebstrap and mke2fs -d of a root file system need root"
    if not any((kernel_dir() / "boot").glob("vmlinuz-*")):
        return f"no cached kernel {DEFAULT_KERNEL} (tools/fetch_kernel.py)"
    return None


def _key() -> str:
    digest = hashlib.sha256("\0".join([VERSION, SUITE, mirror(), *PACKAGES, DEFAULT_KERNEL, CMDLINE,
                                       str(DISK_MB)]).encode())
    return digest.hexdigest()[:16]


def _vmlinuz() -> Path:
    return next((kernel_dir() / "boot").glob("vmlinuz-*"))


def _initrd(out: Path) -> None:
    """busybox, the virtio disk and ext4 modules of the default kernel, and an /init that mounts
    the box's root and hands over to its systemd."""
    from perflab.execution.vm import initramfs, modules

    plan = modules.plan(_vmlinuz(), ["disk", "ext4"], "the test box")
    busybox = initramfs.busybox()
    if busybox is None:
        raise SystemExit("testbox: busybox-static is needed for the box's initramfs")
    init = ["#!/bin/sh", "mount -t proc proc /proc", "mount -t sysfs sys /sys", "mount -t devtmpfs dev /dev"]
    init += [f"insmod {plan.guest_path(p)}" for p in plan.load]
    # The disk appears once virtio_blk has probed it.
    init += ["i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done",
             "mount -t ext4 -o rw /dev/vda /root || { echo 'testbox: cannot mount /dev/vda'; exec sh; }",
             "umount /proc /sys; mount --move /dev /root/dev 2>/dev/null || umount /dev",
             "exec switch_root /root /sbin/init"]
    entries = [initramfs.Entry(d, stat.S_IFDIR | 0o755) for d in ("bin", "dev", "proc", "sys", "root", "lib",
                                                                    "lib/modules")]
    seen = {e.name for e in entries}
    entries.append(initramfs.Entry("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes()))
    listing = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    entries += [initramfs.Entry(f"bin/{a}", stat.S_IFLNK | 0o777, b"busybox") for a in sorted(set(listing))
                if a != "busybox" and "/" not in a]
    files = {**{k: v.read_bytes() for k, v in plan.files().items()}, **plan.data()}
    for path, data in sorted(files.items()):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in seen:
                seen.add(d)
                entries.append(initramfs.Entry(d, stat.S_IFDIR | 0o755))
        entries.append(initramfs.Entry(path.strip("/"), stat.S_IFREG | 0o644, data))
    entries.append(initramfs.Entry("init", stat.S_IFREG | 0o755, ("\n".join(init) + "\n").encode()))
    entries.append(initramfs.Entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)))
    import gzip

    out.write_bytes(gzip.compress(initramfs.write_cpio(entries), mtime=0))


def _customize(root: Path, public_key: str) -> None:
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    (root / "root/.ssh/authorized_keys").write_text(public_key)
    os.chmod(root / "root/.ssh/authorized_keys", 0o600)
    (root / "etc/hostname").write_text("testbox\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n127.0.1.1 testbox\n")
    (root / "etc/fstab").write_text("/dev/vda / ext4 rw,errors=remount-ro 0 1\n")
    (root / "etc/systemd/network").mkdir(parents=True, exist_ok=True)
    (root / "etc/systemd/network/50-eth.network").write_text("[Match]\nName=eth*\n\n[Network]\nDHCP=yes\n")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.symlink("/lib/systemd/system/systemd-networkd.service", wants / "systemd-networkd.service")
    # No wait for "network online" on a box that has one NIC and DHCP from QEMU.
    with contextlib.suppress(FileExistsError):
        os.symlink("/dev/null", root / "etc/systemd/system/systemd-networkd-wait-online.service")
    # A fresh machine-id each boot of each copy (systemd writes one when the file is empty).
    (root / "etc/machine-id").write_text("")
    # The kernels installed on the box get an initramfs of the modules this machine needs (its
    # virtio disk, ext4): Debian's default, MODULES=most, takes 9 minutes to make under TCG here.
    conf = root / "etc/initramfs-tools/conf.d"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "perflab-testbox").write_text("MODULES=dep\nCOMPRESS=gzip\n")
    (root / "etc/kernel-img.conf").write_text("do_symlinks = no\n")


def build() -> Path:
    """The box's directory (image, initrd, key), built the first time (about a minute)."""
    why = missing()
    if why:
        raise SystemExit(f"testbox: {why}")
    top = shared_cache_home() / "box" / _key()
    if (top / "ready").is_file():
        return top
    top.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build.", dir=top.parent))
    try:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "perflab-testbox", "-f",
                        str(scratch / "key")], check=True)
        root = scratch / "root"
        # The box's default kernel installed as Debian installs it (its modules: the NIC's driver;
        # /boot/initrd.img-RELEASE: what a kexec back to it would take).
        from perflab.execution.targets import kexec

        deb = kexec.debian_deb("debian:" + DEFAULT_KERNEL.removeprefix("linux-image-").removesuffix("-unsigned"))
        subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(PACKAGES)},{deb}",
                        SUITE, str(root), mirror()], check=True, stdin=subprocess.DEVNULL)
        _customize(root, (scratch / "key.pub").read_text())
        subprocess.run(["mke2fs", "-q", "-t", "ext4", "-L", "testbox", "-d", str(root), str(scratch / "box.img"),
                        f"{DISK_MB}M"], check=True)
        shutil.rmtree(root)
        _initrd(scratch / "initrd.gz")
        (scratch / "ready").write_text(f"{_vmlinuz()}\n")
        if top.exists():
            shutil.rmtree(top)
        os.rename(scratch, top)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return top


# A kernel recipe the box boots (tests/test_kexec_box.py, built as a Debian package): perflab's
# minimal config and what the box's userspace needs besides — ext4 and the virtio NIC built in,
# systemd's (cgroups, inotify, fhandle, namespaces, seccomp, autofs, /proc/sys), AF_PACKET for
# networkd's DHCP, KEXEC for the way back, RELOCATABLE for kexec-tools' bzImage64 loader, and
# MODULES, so that the package has /lib/modules/RELEASE for initramfs-tools' depmod.
BOX_FRAGMENT = {f"CONFIG_{name}": "y" for name in (
    "MODULES", "RELOCATABLE", "KEXEC", "PROC_SYSCTL", "EXT4_FS", "NETDEVICES", "NET_CORE", "VIRTIO_NET", "PACKET",
    "CGROUPS", "INOTIFY_USER", "FHANDLE", "UNIX98_PTYS", "NAMESPACES", "UTS_NS", "IPC_NS", "PID_NS", "NET_NS",
    "SECCOMP", "SECCOMP_FILTER", "AUTOFS_FS", "TMPFS_POSIX_ACL", "TMPFS_XATTR")}


def linux_repo() -> tuple[Path, str] | None:
    """The linux-source-6.1 tree as a git repository and its ref (made once, shared with
    tools/bench/kernel_bisect.py, which makes it: about a minute); None when the source is not installed."""
    repo = shared_cache_home() / "linux" / "repo"
    if not (repo / ".git").is_dir():
        if not Path("/usr/src/linux-source-6.1.tar.xz").is_file() and not (
                shared_cache_home() / "linux" / "linux-source-6.1" / "Makefile").is_file():
            return None
        script = Path(__file__).resolve().parents[1] / "tools" / "bench" / "kernel_bisect.py"
        subprocess.run([sys.executable, str(script), "--setup-only"], check=True, capture_output=True,
                       env=dict(os.environ, XDG_CACHE_HOME=str(shared_cache_home().parent)))
    return repo, "perflab-base"


def box_recipe(path: Path) -> Path | None:
    """A recipe file at `path` of a kernel the box boots (BOX_FRAGMENT); None without the source."""
    found = linux_repo()
    if found is None:
        return None
    repo, ref = found
    lines = [f"tree: {repo}", f"ref: {ref}", "config: perflab", "name: -box", "fragments:"]
    lines += [("  - " if i == 0 else "    ") + f"{k}: {v}" for i, (k, v) in enumerate(sorted(BOX_FRAGMENT.items()))]
    path.write_text("\n".join(lines) + "\n")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def monitor(sock: str | Path, command: str, timeout: float = 10.0) -> str:
    """One command through a QEMU human monitor socket; what it answered."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        got = b""
        with contextlib.suppress(socket.timeout):
            while b"(qemu)" not in got:
                got += s.recv(4096)
        s.sendall(command.encode() + b"\n")
        said = b""
        with contextlib.suppress(socket.timeout):
            s.settimeout(1.0)
            while b"(qemu)" not in said:
                chunk = s.recv(4096)
                if not chunk:
                    break
                said += chunk
    return said.decode(errors="replace")


@dataclass
class Box:
    """A running box: where it is reached, how to power-cycle it, where its console is."""

    dir: Path                 # this boot's directory (overlay, console, monitor socket, ssh config)
    port: int
    process: subprocess.Popen
    key: Path

    @property
    def console(self) -> Path:
        return self.dir / "console.log"

    @property
    def monitor_socket(self) -> Path:
        return self.dir / "monitor.sock"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def power_cycle_command(self) -> str:
        return f"{sys.executable} {Path(__file__).resolve()} reset {self.monitor_socket}"

    @property
    def console_command(self) -> str:
        return f"tail -c 65536 {self.console}"

    def ssh(self, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-F", str(self.ssh_config), "testbox", command], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def wait_ssh(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the box's QEMU exited {self.process.returncode}: {self.console_tail()}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                if self.ssh("true", timeout=30).returncode == 0:
                    return
            time.sleep(2)
        raise RuntimeError(f"the box did not answer over SSH within {timeout:g} s: {self.console_tail()}")

    def console_tail(self, n: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.console.read_text(errors="replace").splitlines()[-n:])
        return ""

    def machine_config(self, name: str = "testbox", boot_timeout: float = 600) -> str:
        """perflab's configuration of the box as a kexec-capable machine."""
        return (f'[machine.{name}]\nssh = "testbox"\nssh_config = "{self.ssh_config}"\n'
                f'kexec = true\npower_cycle = "{self.power_cycle_command}"\n'
                f'console = "{self.console_command}"\nboot_timeout = {boot_timeout:g}\n')

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def boot(workdir: Path, *, memory_mb: int = 1536, boot_timeout: float = 600) -> Box:
    """The box booted on a fresh overlay in `workdir`, answering over SSH (TCG: a minute or two here)."""
    base = build()
    workdir.mkdir(parents=True, exist_ok=True)
    overlay = workdir / "overlay.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(base / "box.img"),
                    str(overlay)], check=True)
    port = free_port()
    key = workdir / "key"
    shutil.copy(base / "key", key)
    os.chmod(key, 0o600)
    (workdir / "ssh_config").write_text(
        f"Host testbox\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {key}\n"
        "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    vmlinuz = Path((base / "ready").read_text().strip())
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(memory_mb), "-smp", "1", "-display", "none",
            "-kernel", str(vmlinuz), "-initrd", str(base / "initrd.gz"), "-append", CMDLINE,
            "-drive", f"file={overlay},if=virtio,format=qcow2",
            "-nic", f"user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{port}-:22",
            "-serial", f"file:{workdir / 'console.log'}",
            "-monitor", f"unix:{workdir / 'monitor.sock'},server,nowait", "-no-user-config"]
    from perflab.core.process import die_with_parent

    with open(workdir / "qemu.err", "wb") as err:
        # Dies with the test process, also when that is killed (a box once ran on for an hour).
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True,
                                   preexec_fn=die_with_parent)
    box = Box(workdir, port, process, key)
    try:
        box.wait_ssh(boot_timeout)
    except BaseException:
        box.stop()
        raise
    return box


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    if sys.argv[1:2] == ["build"]:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        print(build())
    elif sys.argv[1:2] == ["reset"] and len(sys.argv) == 3:
        monitor(sys.argv[2], "system_reset")
    else:
        raise SystemExit(__doc__)
