"""The layers as the imports draw them: ``sandbox <- harness <- trainers <- cli``, no arrow up and no
import circle, counting the imports written inside functions (a lazy import still ties two
modules together; it only hides the tie from a reader of the file's head), and modules short
enough to read in one sitting. Modules are named as the wheel installs them: ``sandbox/x.py`` is
``rlvr.sandbox.x``; inside ``sandbox`` the verifier core never imports the serving room."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: lower layers first: a module may import its own layer and the ones before it
LAYERS = ("sandbox", "harness", "trainers", "cli")
#: the folders that hold them: the rooms at the top of the repository, and ``rlvr/`` (the package's
#: own folder) whose ``cli`` is the top layer: it imports the commands, and nothing imports it
FOLDERS = ("sandbox", "harness", "trainers", "rlvr")


def module_name(path: Path, root: Path) -> str:
    """``sandbox/code/verify.py`` -> ``rlvr.sandbox.code.verify`` (the folder ``rlvr/`` is ``rlvr``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(parts if parts[0] == "rlvr" else ["rlvr", *parts])


def layer_of(module: str) -> str:
    """``rlvr.harness.cli`` -> ``harness``; the package ``rlvr`` itself is its own top."""
    return module.split(".")[1] if module.count(".") else module


def imported_modules(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    """Every project module ``tree`` imports, at any depth: ``from pkg import mod`` counts as
    ``pkg.mod`` when that is a module, else as ``pkg``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import harness.x.y` where only harness.x is a module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path, packages: tuple[str, ...] = FOLDERS) -> dict[str, set[str]]:
    """``module -> modules it imports`` for every ``.py`` file under ``root/<package>``."""
    files = {module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}
    files.pop("rlvr", None)  # the package's own __init__ imports nothing of ours
    known = set(files)
    return {
        name: imported_modules(ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", known)
        for name, path in files.items()
    }


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every import of a later layer by an earlier one."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if rank.get(layer_of(b), -1) > rank.get(layer_of(a), len(LAYERS))
    )


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None (depth-first search, colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_no_import_circle():
    cycle = find_cycle(import_graph(ROOT))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_import_up_the_layers():
    edges = upward_edges(import_graph(ROOT))
    assert not edges, f"imports up the layers ({' <- '.join(LAYERS)}): " + "; ".join(edges)


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checks_catch_a_circle_closed_inside_a_function_and_an_arrow_up(tmp_path):
    _write(
        tmp_path,
        {
            "sandbox/__init__.py": "",
            "sandbox/low.py": "def f():\n    from rlvr.harness import high\n",
            "harness/__init__.py": "",
            "harness/high.py": "from . import other\n",
            "harness/other.py": "def g():\n    import rlvr.harness.high\n",
            "trainers/__init__.py": "",
            "trainers/step.py": "def h():\n    from rlvr.cli import main\n",
            "rlvr/__init__.py": "",
            "rlvr/cli/__init__.py": "",
            "rlvr/cli/main.py": "import rlvr.harness.high\nimport rlvr.sandbox.low\n",
        },
    )
    graph = import_graph(tmp_path)
    high, other = "rlvr.harness.high", "rlvr.harness.other"
    assert graph[high] == {other} and graph[other] == {high}
    assert find_cycle(graph) == [high, other, high]
    assert upward_edges(graph) == ["rlvr.sandbox.low -> rlvr.harness.high", "rlvr.trainers.step -> rlvr.cli.main"]
    with pytest.raises(AssertionError, match="rlvr.harness.high -> rlvr.harness.other -> rlvr.harness.high"):
        cycle = find_cycle(graph)
        assert cycle is None, "import circle: " + " -> ".join(cycle or [])


#: A module a newcomer can read in one sitting: split a file before it passes this.
MAX_MODULE_LINES = 450


def test_every_module_of_the_three_layers_stays_under_the_line_limit():
    long = {
        str(path.relative_to(ROOT)): n
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"over {MAX_MODULE_LINES} lines: {long}"


def core_to_serving_edges(graph: dict[str, set[str]]) -> list[str]:
    """Imports of ``rlvr.sandbox.serving`` by the verifier core (the rest of ``rlvr.sandbox``)."""
    serving = "rlvr.sandbox.serving"
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if a.startswith("rlvr.sandbox") and not (a == serving or a.startswith(serving + "."))
        for b in targets
        if b == serving or b.startswith(serving + ".")
    )


def test_the_verifier_core_never_imports_the_serving_room():
    edges = core_to_serving_edges(import_graph(ROOT))
    assert not edges, "the verifier core imports sandbox/serving: " + "; ".join(edges)


def test_the_serving_check_catches_an_import_from_the_core(tmp_path):
    _write(
        tmp_path,
        {
            "sandbox/__init__.py": "",
            "sandbox/core.py": "from rlvr.sandbox.serving import server\n",
            "sandbox/serving/__init__.py": "",
            "sandbox/serving/server.py": "import rlvr.sandbox.core\n",
            "harness/__init__.py": "",
            "trainers/__init__.py": "",
        },
    )
    assert core_to_serving_edges(import_graph(tmp_path)) == ["rlvr.sandbox.core -> rlvr.sandbox.serving.server"]


def bare_room_imports(root: Path, folders: tuple[str, ...]) -> list[str]:
    """``file:line`` of every import of a room by its bare name (``import harness``): in an
    installed wheel that name is someone else's package, so every import goes through ``rlvr``."""
    rooms = set(LAYERS)
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                if any(name.split(".")[0] in rooms for name in names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_import_goes_through_the_rlvr_package():
    found = bare_room_imports(ROOT, (*FOLDERS, "tests", "benchmarks"))
    assert not found, "imports of a room by its bare name (use rlvr.<room>): " + ", ".join(found)
