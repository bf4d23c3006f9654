"""The floor plan, enforced: layered packages with one-way imports (docs/architecture.md).

Every import of every module under src/perflab is read with `ast` — at module level and
inside functions (those stay allowed for start-up time, but only downward) — and checked
against LAYERS. A package may import its own modules, and packages of lower layers; never a
package of a higher layer, nor a sibling of its own layer. Within a package no two files
import each other, directly or round a longer loop.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "perflab"

# Bottom first. Packages on one row are siblings: neither imports the other.
LAYERS: list[tuple[str, ...]] = [
    ("core",),                                    # value types, errors, units, text, environment, cbuild, params, git
    ("stats", "store"),                           # pure statistics | the store
    ("execution",),                               # measure: starting a process, work directories, filesystems
    ("benchmarks", "monitors"),                   # measure: families | monitors
    ("jobs",),                                    # measure: job files -> atomic jobs
    ("runner",),                                  # measure: the loop (repetitions, recording)
    ("analysis", "exchange"),                     # read side and views | import/export of runs
    ("report",),                                  # renderers: a view in, text out
    ("automate",),                                # bisect, robot, lab, the Measurer
    ("cli",),                                     # the thin command line
]
# A family's report view hook lives beside the family's code but belongs to the read side.
VIEW_HOOK = ("benchmarks", "view")
MAX_LINES = 600


@dataclass(frozen=True)
class Import:
    source: str          # importing module, dotted
    target: str          # imported module, dotted (the deepest module that exists)
    names: tuple[str, ...]
    line: int
    in_function: bool


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def parsed(source: str) -> ast.Module:
    """A source's tree, parsed once for all the checks that walk it (none changes it)."""
    return ast.parse(source)


@functools.cache
def read_imports(root: Path) -> tuple[frozenset[str], tuple[Import, ...]]:
    """Every perflab import of every module under `root` (a perflab package directory); read once a
    root for the tests that check the tree (a planted tree is a new root each time)."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(p, root): p for p in files}
    found: list[Import] = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = parsed(path.read_text())
        stack: list[ast.AST] = []

        def visit(node: ast.AST, depth: int) -> None:
            inner = depth + isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "perflab":
                        found.append(Import(name, alias.name, (), node.lineno, depth > 0))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] == "perflab":
                    for alias in node.names:
                        full = f"{target}.{alias.name}"
                        if full in modules:   # `from perflab.x import module`
                            found.append(Import(name, full, (), node.lineno, depth > 0))
                        else:
                            found.append(Import(name, target, (alias.name,), node.lineno, depth > 0))
            for child in ast.iter_child_nodes(node):
                visit(child, inner)

        visit(tree, 0)
    return frozenset(modules), tuple(found)


def unit_of(module: str) -> str:
    """The package a module belongs to for layering ('perflab' itself is core)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "core"
    if parts[1] == VIEW_HOOK[0] and parts[-1] == VIEW_HOOK[1]:
        return "analysis"
    return parts[1]


def layer_of(unit: str) -> int:
    for index, row in enumerate(LAYERS):
        if unit in row:
            return index
    raise KeyError(unit)


def violations(root: Path) -> list[str]:
    """Upward imports, sibling imports and packages the floor plan does not place."""
    modules, imports = read_imports(root)
    problems = []
    for unit in sorted({unit_of(m) for m in modules}):
        try:
            layer_of(unit)
        except KeyError:
            problems.append(f"perflab.{unit} is in no layer of LAYERS (tests/test_architecture.py)")
    for imp in imports:
        a, b = unit_of(imp.source), unit_of(imp.target)
        if a == b:
            continue
        try:
            la, lb = layer_of(a), layer_of(b)
        except KeyError:
            continue
        where = f"{imp.source} line {imp.line}{' (in a function)' if imp.in_function else ''}"
        if lb > la:
            problems.append(f"{where} imports {imp.target}: up from {a} (layer {la}) to {b} (layer {lb})")
        elif lb == la:
            problems.append(f"{where} imports {imp.target}: {a} and {b} are siblings of layer {la}")
    return problems


def file_cycles(root: Path) -> list[list[str]]:
    """Loops of imports between modules (Tarjan's strongly connected components)."""
    modules, imports = read_imports(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in imports:
        target = imp.target
        # `from perflab.x import name` of a package's __init__ counts as an import of that module;
        # an import of a package from inside it (its own __init__) is how Python loads it, not a loop.
        if target in modules and target != imp.source and not imp.source.startswith(target + "."):
            graph[imp.source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    loops: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return loops


# -- the tree -----------------------------------------------------------------

def test_no_import_goes_up_a_layer_or_sideways():
    assert violations(SRC) == []


def test_no_import_loops_between_files():
    assert file_cycles(SRC) == []


def test_no_python_file_is_over_the_limit():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_library_code_never_changes_directory():
    # os.chdir changes the whole process's directory: a Measurer passes cwd= to what it starts.
    offenders = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py")
                 for n, line in enumerate(p.read_text().splitlines(), 1) if "os.chdir(" in line]
    assert offenders == []


def test_renderers_take_results_and_compute_nothing():
    # A renderer never reads a store, and from the statistics and analysis layers it takes
    # only types and constants: every figure it prints was computed before it was called.
    _, imports = read_imports(SRC)
    problems = []
    for imp in imports:
        if unit_of(imp.source) != "report":
            continue
        if unit_of(imp.target) == "store":
            problems.append(f"{imp.source} line {imp.line} imports the store ({imp.target})")
        if unit_of(imp.target) in ("stats", "analysis"):
            if not imp.names:
                problems.append(f"{imp.source} line {imp.line} imports the module {imp.target}")
                continue
            module = importlib.import_module(imp.target)
            for name in imp.names:
                value = getattr(module, name)
                if inspect.isfunction(value):
                    problems.append(f"{imp.source} line {imp.line} imports the function {imp.target}.{name}")
    assert problems == []


# -- the checker itself, on planted trees -------------------------------------

def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "perflab"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (directory / "__init__.py").touch()
    return root


def test_checker_catches_a_planted_upward_import(tmp_path):
    root = plant(tmp_path, {
        "core/model.py": "def f():\n    from perflab.report import lkp\n",     # inside a function: still up
        "report/lkp.py": "from perflab.core.model import f\n",
        "store/db.py": "from perflab.stats import compare\n",                  # siblings
        "stats/compare.py": "",
    })
    found = violations(root)
    assert any("perflab.core.model line 2 (in a function) imports perflab.report.lkp: up from core" in p
               for p in found), found
    assert any("stats and store are siblings" in p or "store and stats are siblings" in p for p in found), found
    assert not any("report.lkp line" in p for p in found), found    # report -> core is down


def test_checker_catches_a_planted_file_loop(tmp_path):
    root = plant(tmp_path, {
        "store/a.py": "from perflab.store import b\n",
        "store/b.py": "def g():\n    from perflab.store.a import x\n",
    })
    assert file_cycles(root) == [["perflab.store.a", "perflab.store.b"]]


def test_checker_places_every_package(tmp_path):
    root = plant(tmp_path, {"gadgets/x.py": ""})
    assert violations(root) == ["perflab.gadgets is in no layer of LAYERS (tests/test_architecture.py)"]


# -- issue 32: a layout is named in one place, perflab.report.registry ----------

LAYOUT_REGISTRY = "report/registry.py"


def layout_lists(source: str, where: str) -> list[str]:
    """Literals of `source` (tuples, lists, sets, dict keys) that list comparison layouts by name:
    two or more registered names, unless all of them are also benchmark families (a family table
    naming lmbench and kernbench) or all data formats (export's --format json/csv)."""
    from perflab.benchmarks import FAMILIES
    from perflab.report.registry import LAYOUTS

    names = {layout.name for layout in LAYOUTS}
    formats = {layout.name for layout in LAYOUTS if layout.data}
    found = []
    for node in ast.walk(parsed(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        listed = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)} & names
        if len(listed) >= 2 and not listed <= set(FAMILIES) and not listed <= formats:
            found.append(f"{where} line {node.lineno} lists layouts {sorted(listed)}: "
                         f"derive them from perflab.report.registry (layout_names)")
    return found


def test_layout_names_are_listed_only_in_the_registry():
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel != LAYOUT_REGISTRY:
            problems += layout_lists(path.read_text(), rel)
    assert problems == []


def test_layout_checker_catches_the_old_style_lists():
    # The three copies issue 32 removed, and what must not count as one.
    assert layout_lists('STYLES = ("lkp", "mmtests", "lmbench", "kernbench", "benchstat", "json", "csv")\n', "a")
    assert layout_lists('@click.option("--style", type=click.Choice(("lkp", "mmtests", "benchstat", "json")))\n'
                        'def f(): pass\n', "b")
    assert layout_lists('TAKES_VIEW = {"mmtests", "kernbench", "benchstat"}\n', "c")
    assert layout_lists('STYLES = {"lkp": ("perflab.report.lkp", "render"), "csv": 1}\n', "d")
    assert layout_lists('if style in ("kernbench", "json"): pass\n', "e") == [
        "e line 1 lists layouts ['json', 'kernbench']: derive them from perflab.report.registry (layout_names)"]
    assert layout_lists('FAMILIES = {"cmd": 1, "lmbench": 2, "kernbench": 3}\n'
                        'FORMATS = ["json", "csv"]\nSTYLE = "lkp"\n', "f") == []


# -- the runner knows no target by name (issue 32) -------------------------------------------

# What names a particular place to run: a target module, the VM executor, or the words that
# meant "a guest" in the loop before targets were a seam.
TARGET_MODULES = ("perflab.execution.targets.", "perflab.execution.vm")
TARGET_WORDS = ("in_guest", "guest.", "VmError", "Qemu", "Host(")


def target_names(source: str, where: str) -> list[str]:
    """Where `source` (a runner module) imports a target by name or asks a job whether it is a guest's."""
    found = []
    for node in ast.walk(parsed(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            # A name imported from a package is a module of it when its file exists.
            package = SRC.parent.joinpath(*node.module.split("."))
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                       if (package / f"{a.name}.py").exists() or (package / a.name).is_dir()]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        named = [m for m in modules if m.startswith(TARGET_MODULES)]
        if named:
            found.append(f"{where} line {node.lineno} imports {named[0]}: the runner asks a job's target, "
                         "whatever it is (perflab.execution.targets)")
    for number, line in enumerate(source.splitlines(), 1):
        code = line.split("#", 1)[0]
        for word in TARGET_WORDS:
            if word in code:
                found.append(f"{where} line {number} names {word!r}: the runner asks a job's target, whatever it is")
    return found


def test_the_runner_names_no_target():
    problems = []
    for path in sorted((SRC / "runner").rglob("*.py")):
        problems += target_names(path.read_text(), path.relative_to(SRC).as_posix())
    assert problems == []


def test_target_checker_catches_a_named_target():
    assert target_names("from perflab.execution.targets.qemu import Qemu\n", "a")
    assert target_names("from perflab.execution.targets import qemu\n", "b")
    assert target_names("from perflab.runner import guest\nguest.check(jobs)\n", "c")
    assert target_names("if o.job.in_guest:\n    pass\n", "d")
    assert target_names("try:\n    pass\nexcept VmError as e:\n    pass\n", "e")
    assert target_names("from perflab.execution.targets import BootFailure\n# a guest. in a comment\n", "f") == []


def test_the_command_line_imports_no_statistics(tmp_path):
    # Issue 32: cli/ parses options and prints what runner/ and analysis/ computed; no module of
    # it imports perflab.stats, at module level or inside a function. Checked on the tree, and
    # the checker on planted sources: an import in a function, of the package, and a fine one.
    def statistics_in_cli(root: Path) -> list[str]:
        _, imports = read_imports(root)
        return [f"{imp.source} line {imp.line}{' (in a function)' if imp.in_function else ''} imports {imp.target}"
                for imp in imports if unit_of(imp.source) == "cli" and unit_of(imp.target) == "stats"]

    assert statistics_in_cli(SRC) == []
    planted = plant(tmp_path, {
        "cli/run.py": "import click\n\ndef f():\n    from perflab.stats.relative import spread\n",
        "cli/show.py": "from perflab import stats\n",
        "cli/check.py": "from perflab.analysis import gate\nfrom perflab.runner.service import perform\n",
        "stats/relative.py": "", "analysis/gate.py": "", "runner/service.py": "",
    })
    assert statistics_in_cli(planted) == ["perflab.cli.run line 4 (in a function) imports perflab.stats.relative",
                                          "perflab.cli.show line 1 imports perflab.stats"]
