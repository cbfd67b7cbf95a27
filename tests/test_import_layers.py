"""The packages of simulator/ import only down the layers of docs/architecture.md, and
without cycles.

A package is a first-level folder (`session`, `endpoints`, …) or a top-level module
(`runs`, `workers`, `lab`, …). Every import counts, also the ones inside functions: a
function-level import that closes a cycle is the coupling this test exists to catch.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "simulator"
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"

# Edges allowed to close a cycle for now, each with the branch that removes it.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()   # none: every package edge is one-way


def _unit(module: str) -> str:
    """The package a dotted module name belongs to ("simulator.session.agent" → "session")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imported(path: Path) -> Iterator[tuple[str, int]]:
    """(imported simulator module, line) for every import statement in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target, node.lineno
            if target == "simulator":         # `from simulator import runs`
                for alias in node.names:
                    if (ROOT / alias.name).is_dir() or (ROOT / f"{alias.name}.py").is_file():
                        yield f"simulator.{alias.name}", node.lineno


@functools.cache
def package_graph() -> dict[str, dict[str, list[str]]]:
    """package → imported package → ["file:line", …] (simulator's own imports only)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        src = _unit(_module_name(path))
        for target, line in _imported(path):
            if not target.startswith("simulator."):
                continue
            dst = _unit(target)
            if dst != src:
                where = f"{path.relative_to(ROOT.parent)}:{line}"
                graph.setdefault(src, {}).setdefault(dst, []).append(where)
    return graph


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle [a, b, …, a] of the directed graph, or None when it is acyclic."""
    state: dict[str, int] = {}         # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(edges.get(v, ())):
            if state.get(w) == 1:
                return [*path[path.index(w):], w]
            if w not in state and (found := visit(w)) is not None:
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state and (found := visit(v)) is not None:
            return found
    return None


def test_find_cycle_reports_the_loop() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_packages_import_each_other_without_cycles() -> None:
    graph = package_graph()
    edges = {src: {dst for dst in dsts if (src, dst) not in KNOWN_EXCEPTIONS
                   and (dst, src) not in KNOWN_EXCEPTIONS}
             for src, dsts in graph.items()}
    cycle = find_cycle(edges)
    if cycle is not None:
        hops = [f"  {a} → {b}: {', '.join(graph[a][b])}" for a, b in itertools.pairwise(cycle)]
        raise AssertionError("import cycle between packages " + " → ".join(cycle) + "\n"
                             + "\n".join(hops))


def test_the_bottom_layer_imports_nothing_above_it() -> None:
    graph = package_graph()
    assert set(graph.get("protocol", {})) <= {"util"}, graph.get("protocol")
    assert "session" not in graph.get("endpoints", {})
    assert "session" not in graph.get("records", {})
    assert "session" not in graph.get("importers", {})
    assert not {"run", "sweep", "lab", "cli"} & set(graph.get("analysis", {}))


def layer_table(text: str) -> dict[str, tuple[int, int]]:
    """package → (layer, position in its row) from the layer table of the architecture
    page: rows `| N name | `a`, `b` | … |`."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*(\d+)\s[^|]*\|([^|]*)\|", line)
        if m:
            for pos, name in enumerate(re.findall(r"`([^`]+)`", m.group(2))):
                out[name.strip("*")] = (int(m.group(1)), pos)
    return out


def upward(graph: dict[str, dict[str, list[str]]],
           layers: dict[str, tuple[int, int]]) -> list[str]:
    """Each import against the table: to a higher layer, or within a row to a package
    listed after the importer (one line per edge, with its file:line)."""
    bad = []
    for src, dsts in sorted(graph.items()):
        for dst, where in sorted(dsts.items()):
            if src in layers and dst in layers and layers[dst] >= layers[src]:
                bad.append(f"{src} (layer {layers[src][0]}) → {dst} (layer "
                           f"{layers[dst][0]}): {', '.join(where)}")
    return bad


def test_the_direction_check_catches_an_upward_and_a_sideways_import() -> None:
    layers = layer_table("| 0 base | `a`, `b` | x |\n| 1 top | `c` | y |\n")
    assert layers == {"a": (0, 0), "b": (0, 1), "c": (1, 0)}
    assert upward({"b": {"a": ["b.py:1"]}, "c": {"b": ["c.py:2"]}}, layers) == []
    assert upward({"a": {"c": ["a.py:3"], "b": ["a.py:4"]}}, layers) == [
        "a (layer 0) → b (layer 0): a.py:4", "a (layer 0) → c (layer 1): a.py:3"]


def test_every_import_points_down_the_layers_of_the_architecture_page() -> None:
    layers = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    graph = package_graph()
    units = {_unit(_module_name(p)) for p in ROOT.rglob("*.py")} - {"simulator"}  # __init__
    missing = sorted(units - set(layers))
    assert not missing, f"packages missing from the layer table of {ARCHITECTURE.name}: {missing}"
    bad = upward(graph, layers)
    assert not bad, "imports against the layer table:\n  " + "\n  ".join(bad)


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """module → the simulator modules it imports (every import: deferred, TYPE_CHECKING)."""
    mods = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for target, _ in _imported(path):
            for name in (target, *(f"{target}.{a}" for a in ())):
                if name in mods and name != m and not (
                        mods[name].name == "__init__.py" and m.startswith(name + ".")):
                    graph[m].add(name)
        # `from simulator.pkg import module` names a module too
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    if name in mods and name != m:
                        graph[m].add(name)
    return graph


def test_no_two_modules_import_each_other_even_inside_a_room() -> None:
    """No circle between modules, inside a package too (a deferred import that closes
    one is the coupling this test exists to catch)."""
    cycle = find_cycle(module_graph())
    assert cycle is None, "modules importing each other: " + " → ".join(cycle or [])


def _function_imports(node: ast.AST, inside: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements inside a function body (at any depth)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom) and inside:
            yield child
        yield from _function_imports(
            child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))


def _deferred_simulator_imports() -> list[tuple[Path, int, str, list[str]]]:
    """(file, line, module, the lines above it) of every import of a simulator module
    inside a function."""
    out: list[tuple[Path, int, str, list[str]]] = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in _function_imports(ast.parse(text)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            if any(n.startswith("simulator") for n in names):
                out.append((path, node.lineno, names[0],
                            lines[max(0, node.lineno - 4):node.lineno]))
    return out


def test_a_deferred_import_says_why() -> None:
    """Outside the CLI (whose commands load only what they run, for `--help` and
    start-up time) a function-level import of a simulator module stays only where the
    module is heavy or optional, and says so: `# deferred: <why>` on it or just above."""
    bare = [f"{p.relative_to(ROOT.parent)}:{line} {mod}"
            for p, line, mod, above in _deferred_simulator_imports()
            if "/cli/" not in str(p) and not any("deferred" in ln for ln in above)]
    assert not bare, "deferred imports without a reason:\n  " + "\n  ".join(bare)


def rooms_on_page(text: str) -> set[str]:
    """The rooms the architecture page lists: the `room/` first cell of each row of its
    Rooms table."""
    section = text.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_/]+)/` \|", section, re.M))


def test_the_architecture_page_lists_every_room_of_the_tree() -> None:
    """Every package and subpackage of simulator/ is on the page, and nothing else is."""
    tree = {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("__init__.py")} - {"."}
    page = rooms_on_page(ARCHITECTURE.read_text(encoding="utf-8"))
    assert page == tree, (f"rooms missing from docs/architecture.md: {sorted(tree - page)}; "
                          f"listed but not in the tree: {sorted(page - tree)}")
