"""The test tree mirrors the rooms of the code: the tests of `simulator/<room>/` sit in
`tests/<room>/`, so a module's tests are found where its code is, and a new room's
tests get a new folder, not a seat in a neighbour's.

A folder of tests/ that holds Python files names a room (a package of simulator/) or is
on `ALLOWED` with the reason it names none (a folder of data only needs neither); a test module sits in a room that holds code of its own (not in
`tests/twin/`, whose package only groups its subrooms) or in an allowed folder; at the
top of tests/ only the modules of `TOP_LEVEL` (shared helper modules may sit there).

`python -m tests.test_test_rooms` prints how many modules of simulator/ have a test
module in their matching folder.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Folders of tests/ that name no room, each with the reason (they hold every folder below).
ALLOWED: dict[str, str] = {
    "fixtures": "data the tests read (transcripts, traces, scenarios): no test modules",
    "reliability": "end-to-end hostile rounds (signals, resume, soak, fuzzed input) "
                   "through the CLI and real processes, across every room",
    "docs": "runs the commands of README.md and docs/*.md, not one room's code",
}

# Test modules at the top of tests/, each with the reason it belongs to no room.
TOP_LEVEL: dict[str, str] = {
    "test_import_layers.py": "the import layers of the whole simulator/ tree",
    "test_test_rooms.py": "this check, over the whole tests/ tree",
    "test_sim_speed_scale.py": "benchmarks/sim_speed.py, a script outside simulator/",
    "test_casts_left.py": "the typing casts of the whole simulator/ tree",
    "test_typed_rows.py": "the row types of records/, live/ and endpoints/ together",
}


def rooms(simulator: Path) -> dict[str, bool]:
    """room ("twin/core") → whether it holds code of its own (a module beside its
    `__init__.py`)."""
    return {p.parent.relative_to(simulator).as_posix():
            any(q.name != "__init__.py" for q in p.parent.glob("*.py"))
            for p in simulator.rglob("__init__.py") if p.parent != simulator}


def is_test_module(path: Path) -> bool:
    """What pytest collects by its default `python_files`."""
    return path.suffix == ".py" and (path.name.startswith("test_") or path.stem.endswith("_test"))


def _folders(tests: Path) -> Iterator[str]:
    for p in sorted(tests.rglob("*")):
        rel = p.relative_to(tests)
        if p.is_dir() and not any(part.startswith((".", "__")) for part in rel.parts):
            yield rel.as_posix()


def _allowed(folder: str, allowed: dict[str, str]) -> bool:
    return any(folder == a or folder.startswith(a + "/") for a in allowed)


def stray_folders(tests: Path, known: dict[str, bool],
                  allowed: dict[str, str] = ALLOWED) -> list[str]:
    """Folders of tests/ holding Python files that name no room and are not allowed (a
    folder of data only, such as `report/data/`, is no test folder)."""
    return [f for f in _folders(tests) if f not in known and not _allowed(f, allowed)
            and any((tests / f).glob("*.py"))]


def homeless_modules(tests: Path, known: dict[str, bool], allowed: dict[str, str] = ALLOWED,
                     top_level: dict[str, str] = TOP_LEVEL) -> list[str]:
    """Test modules whose folder is no room with code of its own, no allowed folder, and
    (at the top of tests/) not on the top-level list; each with why."""
    bad = []
    for p in sorted(tests.rglob("*.py")):
        rel = p.relative_to(tests)
        folder = rel.parent.as_posix()
        if not is_test_module(p) or _allowed(folder, allowed) or \
                any(part.startswith((".", "__")) for part in rel.parts):
            continue
        if folder == ".":
            if p.name not in top_level:
                bad.append(f"{rel}: at the top of tests/ (put it in the folder of its room)")
        elif folder not in known:
            bad.append(f"{rel}: simulator/{folder}/ is no room")
        elif not known[folder]:
            subs = sorted(r for r in known if r.startswith(folder + "/"))
            bad.append(f"{rel}: simulator/{folder}/ holds no code of its own (one of {subs})")
    return bad


def packages_missing(tests: Path) -> list[str]:
    """Folders of test modules without an `__init__.py` (their modules would be imported
    by bare name, so two `test_x.py` in two rooms would clash)."""
    return [f for f in _folders(tests) if not (tests / f / "__init__.py").is_file()
            and any(is_test_module(p) for p in (tests / f).glob("*.py"))]


def _tree(root: Path, files: list[str]) -> Path:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("", encoding="utf-8")
    return root


def test_the_check_fails_a_folder_that_names_no_room_and_a_module_outside_its_room(
        tmp_path: Path) -> None:
    sim = _tree(tmp_path / "simulator", ["__init__.py", "run/__init__.py", "run/drive.py",
                                         "twin/__init__.py", "twin/core/__init__.py",
                                         "twin/core/engine.py"])
    tests = _tree(tmp_path / "tests", [
        "__init__.py", "helpers.py", "test_layers.py", "test_loose.py",
        "run/__init__.py", "run/test_drive.py",
        "runs/__init__.py", "runs/test_old.py",                 # a room's old name
        "twin/__init__.py", "twin/test_flat.py",                # above its subrooms
        "twin/core/__init__.py", "twin/core/test_engine.py",
        "fixtures/traces/a.jsonl", "benchmarks/__init__.py", "run/data/out.txt"])
    known = rooms(sim)
    assert known == {"run": True, "twin": False, "twin/core": True}
    assert stray_folders(tests, known, {"fixtures": "data"}) == ["benchmarks", "runs"]
    assert homeless_modules(tests, known, {"fixtures": "data"}, {"test_layers.py": "why"}) == [
        "runs/test_old.py: simulator/runs/ is no room",
        "test_loose.py: at the top of tests/ (put it in the folder of its room)",
        "twin/test_flat.py: simulator/twin/ holds no code of its own (one of ['twin/core'])"]
    assert stray_folders(tests, known, {"fixtures": "data", "benchmarks": "x", "runs": "y"}) == []
    assert packages_missing(tests) == []
    (tests / "twin" / "core" / "__init__.py").unlink()
    assert packages_missing(tests) == ["twin/core"]


def test_every_test_folder_names_a_room_of_the_code() -> None:
    bad = stray_folders(ROOT / "tests", rooms(ROOT / "simulator"))
    assert not bad, ("folders of tests/ that name no room of simulator/ (move their tests to "
                     f"the room whose code they test, or allow the folder with a reason): {bad}")


def test_every_test_module_sits_in_the_room_of_its_code() -> None:
    bad = homeless_modules(ROOT / "tests", rooms(ROOT / "simulator"))
    assert not bad, "test modules outside the rooms of the code:\n  " + "\n  ".join(bad)


def test_the_allow_lists_name_what_exists_and_no_room() -> None:
    known = rooms(ROOT / "simulator")
    assert not [a for a in ALLOWED if a in known or not (ROOT / "tests" / a).is_dir()], ALLOWED
    assert all((ROOT / "tests" / t).is_file() for t in TOP_LEVEL), TOP_LEVEL


def test_every_folder_of_test_modules_is_a_package() -> None:
    bad = packages_missing(ROOT / "tests")
    assert not bad, f"folders of tests/ without an __init__.py: {bad}"


def _imports(path: Path) -> set[str]:
    """The simulator modules a file imports (`from simulator.a import b` names `a.b` too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return {m for m in out if m.startswith("simulator")}


def _has_code(path: Path) -> bool:
    """A module that defines something (an `__init__.py` of imports only does not)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(not isinstance(n, ast.Import | ast.ImportFrom)
               and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
               and not (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__")
               for n in body)


def share(root: Path = ROOT) -> tuple[int, int]:
    """(modules with a test module in their matching folder that imports them, modules):
    simulator/a/b.py's folder is tests/a/, simulator/a/__init__.py's too, simulator/lab.py's
    tests/ itself; `__main__.py` and `__init__.py` files that define nothing are left out."""
    sim, tests = root / "simulator", root / "tests"
    covered = total = 0
    for path in sorted(sim.rglob("*.py")):
        if path.name == "__main__.py" or not _has_code(path):
            continue
        rel = path.relative_to(sim)
        parts = rel.parent.parts if path.name == "__init__.py" else rel.with_suffix("").parts
        name = ".".join(("simulator", *parts))
        folder = tests.joinpath(*rel.parent.parts)
        total += 1
        covered += any(name in _imports(t) for t in folder.glob("*.py") if is_test_module(t))
    return covered, total


def test_the_share_counts_a_module_imported_by_a_test_of_its_own_folder(tmp_path: Path) -> None:
    _tree(tmp_path, ["simulator/__init__.py", "simulator/lab.py", "simulator/__main__.py",
                     "simulator/run/__init__.py", "simulator/run/drive.py", "simulator/run/spec.py",
                     "simulator/twin/__init__.py", "tests/twin/__init__.py"])
    for f in ("lab.py", "run/drive.py", "run/spec.py"):
        (tmp_path / "simulator" / f).write_text("X = 1\n", encoding="utf-8")
    (tmp_path / "simulator/twin/__init__.py").write_text('"""doc"""\n', encoding="utf-8")
    tests = tmp_path / "tests"
    (tests / "run").mkdir()
    (tests / "run" / "test_a.py").write_text("from simulator.run import drive\n", encoding="utf-8")
    (tests / "run" / "helper.py").write_text("import simulator.run.spec\n", encoding="utf-8")
    (tests / "test_b.py").write_text("from simulator.run.spec import X\n", encoding="utf-8")
    assert share(tmp_path) == (1, 3)          # lab, run.drive (covered), run.spec (not here)
    (tests / "test_b.py").write_text("from simulator.lab import X\n", encoding="utf-8")
    assert share(tmp_path) == (2, 3)


if __name__ == "__main__":
    import sys

    got, of = share(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)
    print(f"{got} of {of} modules of simulator/ ({got / of:.0%}) have a test module "
          "in the folder of their room that imports them")
