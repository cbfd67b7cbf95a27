"""Installs are reproducible (issue 57): the README's install and `.ci/run` take every
dependency at the release `constraints.txt` pins, and it pins each one pyproject names;
`.ci/run-latest`, the check with the newest releases, is documented."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and re.fullmatch(r"[\w.+!-]+", version), line
            assert _norm(name) not in out, f"{name} pinned twice"
            out[_norm(name)] = version
    return out


def test_constraints_pin_every_dependency_pyproject_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    names = {_norm(re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]) for req in wanted}
    pins = _pins()
    assert names - pins.keys() == set(), "not pinned in constraints.txt"


def test_readme_and_ci_install_with_the_constraints() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install -c constraints.txt -e '.[dev]'" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"pip install (-q )?-c constraints.txt -e '\.\[dev\]'", ci)
    latest = (ROOT / ".ci" / "run-latest").read_text()
    assert "constraints.txt -e" not in latest and "--upgrade" in latest
    assert ".ci/run-latest" in (ROOT / "docs" / "development.md").read_text()
