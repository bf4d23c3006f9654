"""`perflab kernel`: a minimal kernel config that boots under perflab, a check of a kernel's config,
and Debian's kernels fetched into perflab's cache (fetch, list, prune)."""

from __future__ import annotations

import click


@click.group("kernel")
def kernel_group() -> None:
    """Kernels for perflab's guests: configurations (docs/vm.md, "Kernel configuration") and Debian's
    kernels by release (docs/vm.md, "Kernels by name")."""


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


@kernel_group.command("fetch")
@click.argument("names", nargs=-1, required=True, metavar="debian:RELEASE...")
def kernel_fetch(names) -> None:
    """Fetch Debian kernels into perflab's cache (apt-get download, once) and print each image.

    A job names one as `kernel: debian:RELEASE` (or `--kernel debian:RELEASE`), RELEASE as
    `uname -r` says it in that kernel; a run fetches it itself when it is not here yet.

    \b
    Examples:
      perflab kernel fetch debian:6.1.0-56-amd64 debian:6.1.0-56-cloud-amd64 debian:6.1.0-56-rt-amd64
      perflab run lmbench --only processes --kernel debian:6.12.117+deb12-amd64 --vm icount
    """
    from perflab.core.errors import UsageProblem
    from perflab.execution.vm import kernel

    for name in names:
        if not name.startswith(kernel.DEBIAN):
            raise UsageProblem(f"{name!r}: expected debian:RELEASE (debian:6.1.0-56-amd64)")
        # A damaged cached image is fetched again here (a run refuses it, pointing here).
        click.echo(f"{name}  {kernel.fetch(kernel.debian_package(name), replace_damaged=True)}")


@kernel_group.command("build")
@click.argument("recipe_file", type=click.Path(dir_okay=False, exists=True), metavar="RECIPE.yaml")
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), help="make -jN (default: the CPUs).")
def kernel_build(recipe_file, jobs) -> None:
    """Build the kernel a recipe names (a job file's `kernel:` mapping: tree, ref, patches, config,
    fragments, cc, kcflags, name) into perflab's cache, and print its image. A recipe built before
    is not built again. A second build of the same tree waits for the first; make dies with
    perflab (Ctrl-C, kill -9); the make log is build.log in the build directory.

    \b
    Example:
      printf 'tree: ~/src/linux\nref: v6.1\ncc: gcc-12\nkcflags: -Os\nname: -gcc12-Os\n' > os.yaml
      perflab kernel build os.yaml
    """
    from perflab.core import steps
    from perflab.execution.vm import recipe

    doc = recipe.read_recipe_file(recipe_file)
    done = recipe.build(recipe.recipe_of(doc, recipe_file), jobs=jobs, say=steps.say)
    click.echo(f"{done.facts.get('kernel_build_release') or done.key}  {done.image}")


@kernel_group.command("list")
def kernel_list() -> None:
    """The kernels in perflab's cache: Debian's fetched ones and the builds of recipes, with their size.

    An image that is not what its package holds (cut short, changed) is marked DAMAGED, with the
    command that fetches it again."""
    from perflab.execution.vm import kernel, recipe

    kept = kernel.fetched()
    for name, path, size, damaged in kept:
        mark = f"  DAMAGED: {damaged}; refetch with `perflab kernel fetch {name}`" if damaged else ""
        click.echo(f"{name:<34} {size / 2**20:8.1f} MiB  {path}{mark}")
    built = recipe.builds()
    for key, path, size, facts in built:
        name = facts.get("kernel_build_release") or key
        damaged = kernel.bzimage_damage(path)
        mark = f"  DAMAGED: {damaged}; build it again after `perflab kernel prune --builds`" if damaged else ""
        click.echo(f"{name:<34} {size / 2**20:8.1f} MiB  {path}  (built from {facts.get('kernel_recipe', '?')}){mark}")
    total = sum(k[2] for k in kept) + sum(b[2] for b in built)
    click.echo(f"{len(kept) + len(built)} kernel{'' if len(kept) + len(built) == 1 else 's'}, {total / 2**20:.1f} MiB "
               f"in {kernel.cache_dir()} and {recipe.cache_dir()}")


@kernel_group.command("prune")
@click.argument("names", nargs=-1, metavar="[debian:RELEASE...]")
@click.option("--all", "everything", is_flag=True, help="Every fetched kernel.")
@click.option("--builds", is_flag=True, help="Every kernel built from a recipe, and the build directories.")
def kernel_prune(names, everything, builds) -> None:
    """Remove fetched Debian kernels (fetched again when a job names one) or built ones (built again)."""
    from perflab.core.errors import UsageProblem
    from perflab.execution.vm import kernel, recipe

    if builds and not names and not everything:
        click.echo(f"{recipe.prune_builds() / 2**20:.1f} MiB freed (builds)")
        return
    if bool(names) == everything:
        raise UsageProblem("name the kernels to remove (debian:RELEASE ...), or give --all or --builds")
    chosen = [kept[0] for kept in kernel.fetched()] if everything else list(names)
    freed = 0
    for name in chosen:
        size = kernel.remove(name)
        click.echo(f"{name}: {'removed, ' + format(size / 2**20, '.1f') + ' MiB freed' if size else 'not in the cache'}")
        freed += size
    click.echo(f"{freed / 2**20:.1f} MiB freed")


COMMANDS = [kernel_group]
