"""`perflab kernel`: a minimal kernel config that boots under perflab, and a check of a kernel's config."""

from __future__ import annotations

import click


@click.group("kernel")
def kernel_group() -> None:
    """Kernel configurations for perflab's guests (docs/vm.md, "Kernel configuration")."""


@kernel_group.command("config")
@click.option("--base", type=click.Choice(("tinyconfig", "defconfig")), default="tinyconfig", show_default=True,
              help="The tree's own configuration to start from.")
@click.option("--tree", type=click.Path(file_okay=False), default=".", show_default=True,
              help="The kernel source tree (left untouched: kbuild runs in a scratch O= directory).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Where to write the config (e.g. BUILD/.config).")
def kernel_config(base, tree, output) -> None:
    """Write a minimal kernel config that boots perflab's guest and runs its families.

    The tree's `make tinyconfig` (or defconfig), the options perflab needs merged
    on top with the tree's scripts/kconfig/merge_config.sh, then `make olddefconfig`.

    \b
    Examples:
      perflab kernel config --tree ~/linux -o ~/build/.config
      perflab kernel config --tree . --base defconfig -o /tmp/perflab.config
    """
    from pathlib import Path

    from perflab.execution.vm import kconfig

    names = kconfig.write_config(Path(tree), Path(output), base)
    click.echo(f"wrote {output}: {base} + {len(names)} options perflab needs (all set)")


@kernel_group.command("check")
@click.argument("config_or_kernel", type=click.Path(dir_okay=False), metavar="CONFIG|KERNEL")
def kernel_check(config_or_kernel) -> None:
    """Name, in one line, the options a kernel lacks to boot and run under perflab; exit 1 if any.

    Reads a .config, a bzImage built with IKCONFIG, or the config beside a kernel
    (Debian's /boot/config-RELEASE beside vmlinuz-RELEASE, a build tree's .config).
    The guest loads its 9p, virtio disk and file systems as modules when the kernel's
    modules are found (beside a Debian vmlinuz, in a build tree, /lib/modules): those
    count as present given a kernel; given a bare .config, a module (=m) counts as lacking.

    \b
    Examples:
      perflab kernel check /boot/vmlinuz-$(uname -r)
      perflab kernel check ~/build/.config
    """
    from pathlib import Path

    from perflab.execution.vm import kconfig

    where, lacking, loaded = kconfig.check(Path(config_or_kernel))
    as_modules = f" ({len(loaded)} as modules the guest loads: {' '.join(loaded)})" if loaded else ""
    if not lacking:
        click.echo(f"{where}: has all {len(kconfig.NAMES)} options perflab's guest uses{as_modules}")
        return
    modules = (" (=m: a module the guest does not load, or whose module files are not at hand)"
               if any(n.endswith("=m") for n in lacking) else "")
    click.echo(f"{where}: lacks {len(lacking)} of {len(kconfig.NAMES)} options perflab's guest uses: "
               f"{' '.join(lacking)}{modules}{as_modules}")
    raise click.exceptions.Exit(1)


COMMANDS = [kernel_group]
