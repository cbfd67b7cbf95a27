"""The engine install runs in the xdist controller, whose terminal the user sees
(issue 57 item 9): which engines it installs is read from the selected test files and
the `-m` expression, since the controller collects no items."""

from __future__ import annotations

from pathlib import Path

from tests.engines_fixtures import engines_in_files

TESTS = Path(__file__).resolve().parents[1]


def test_the_readme_pytest_installs_every_engine_first() -> None:
    got = engines_in_files([TESTS], "not campaign")
    assert got[:2] == ["vllm", "llamacpp"] and "smollm2" in got


def test_nothing_is_installed_when_real_engine_tests_are_deselected() -> None:
    assert engines_in_files([TESTS], "not real_engine") == []
    assert engines_in_files([TESTS], "not slow and not real_engine") == []


def test_files_that_use_no_engine_install_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x(tmp_path): pass\\n")
    assert engines_in_files([tmp_path, TESTS / "util" / "test_ids.py::test_a"], "") == []
    (tmp_path / "test_y.py").write_text("def test_y(llamacpp_server): pass\\n")
    assert engines_in_files([tmp_path], "") == ["llamacpp"]
