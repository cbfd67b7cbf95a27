"""Scenario files: the bundled ones validate; bad input gets a located one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.errors import ScenarioError
from simulator.scenario.load import load_scenario
from tests.conftest import SCENARIOS, small_scenario


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_bundled_scenario_validates(path: Path) -> None:
    s, _ = load_scenario(path)
    assert s.turns > 0 and (s.turn_templates or s.replay is not None)
    for kind in ("none", "prune", "block", "summarize", "clear_tool_results"):
        assert load_scenario(path, [f"compaction.kind={kind}"])[0].compaction.kind == kind


def test_overrides_win_and_parse_as_yaml(write_scenario) -> None:  # type: ignore[no-untyped-def]
    p = write_scenario()
    s, resolved = load_scenario(p, ["sessions=8", "turns=553", "compaction.kind=prune",
                                    "think_time_s={dist: uniform, low: 1, high: 2}"])
    assert (s.sessions, s.turns, s.compaction.kind) == (8, 553, "prune")
    assert s.compaction.budget_tokens == 4000  # type: ignore[union-attr]
    assert s.think_time_s.dist == "uniform"
    assert resolved["sessions"] == 8


BAD = [
    ("name: x\nturns: [1\n", "malformed YAML", "flow sequence at line 2"),
    (None, "unknown key", "turn_templates.0.bogus"),
    (None, "valid integer", "turns"),
    (None, "must be <", "compaction"),
    (None, "greater than or equal to 0", "output_tokens"),
]


def _bad_docs() -> list[tuple[str, str, str]]:
    docs = []
    d = small_scenario()
    d["turn_templates"][0]["bogus"] = 1
    docs.append(d)
    d = small_scenario(turns="many")
    docs.append(d)
    d = small_scenario()
    d["compaction"]["low_water_tokens"] = 9000
    docs.append(d)
    d = small_scenario()
    d["turn_templates"][0]["output_tokens"] = {"dist": "constant", "value": -5}
    docs.append(d)
    import yaml
    texts = [BAD[0][0]] + [yaml.safe_dump(x, sort_keys=False) for x in docs]
    return [(t, want, where) for t, (_, want, where) in zip(texts, BAD, strict=True)]


@pytest.mark.parametrize(("text", "want", "where"), _bad_docs())
def test_bad_input_is_one_located_line_exit_2(write_scenario, text: str, want: str,  # type: ignore[no-untyped-def]
                                               where: str) -> None:
    p = write_scenario(text=text)
    with pytest.raises(ScenarioError) as ei:
        load_scenario(p)
    msg = str(ei.value)
    assert want in msg and where in msg and str(p) in msg and "\n" not in msg
    res = CliRunner().invoke(main, ["validate", str(p)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and res.output.startswith("error: ")
    assert "Traceback" not in res.output


def test_error_names_the_line_of_the_key(write_scenario) -> None:  # type: ignore[no-untyped-def]
    text = "name: x\nturns: 5\nturn_templates:\n  - name: a\n    weight: 1\n    output_tokens: 10\n    oops: 1\n"
    p = write_scenario(text=text)
    with pytest.raises(ScenarioError, match=r":7 turn_templates\.0\.oops: unknown key"):
        load_scenario(p)


def test_missing_files_and_bad_override(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(tmp_path / "nope.yaml")
    p = write_scenario(small_scenario(system={"file": "missing.txt"}))
    with pytest.raises(ScenarioError, match=r"system\.file: referenced file not found"):
        load_scenario(p)
    p = write_scenario()
    with pytest.raises(ScenarioError, match=r"^--set turns: "):
        load_scenario(p, ["turns=-1"])
    with pytest.raises(ScenarioError, match="must look like key.path=value"):
        load_scenario(p, ["turns"])
    with pytest.raises(ScenarioError, match="compaction"):
        load_scenario(p, ["compaction.kind=bogus"])


def test_files_for_system_and_tools(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sys.txt").write_text("You are a helpful coding agent.")
    (tmp_path / "tools.json").write_text('[{"name": "Read", "description": "read", '
                                         '"input_schema": {"type": "object"}}]')
    p = write_scenario(small_scenario(system={"file": "sys.txt"},
                                      tools={"file": "tools.json"}))
    from simulator.session.prefix import build_base_prefix
    s, _ = load_scenario(p)
    prefix = build_base_prefix(s)
    assert prefix.system == "You are a helpful coding agent."
    assert prefix.tools[0]["name"] == "Read"
    (tmp_path / "sys.txt").write_text("You are a careful coding agent.")
    assert build_base_prefix(s).system == "You are a careful coding agent."  # read again


def test_a_synthesised_prefix_is_one_object_a_process(write_scenario) -> None:  # type: ignore[no-untyped-def]
    """The probes of a search share the prefix object (what is cached by its identity
    serves them all), and anything it is made from makes its own."""
    from simulator.session.prefix import _build, build_base_prefix
    s, _ = load_scenario(write_scenario())
    first = build_base_prefix(s)
    assert build_base_prefix(load_scenario(write_scenario())[0]) is first
    assert first == _build(s)                               # what a fresh build gives
    others = [load_scenario(write_scenario(), [o])[0] for o in
              ("seed=8", "system.tokens=50", "tools.count=4", "tools.tokens=900")]
    assert all(build_base_prefix(o) == _build(o) != first for o in others)
