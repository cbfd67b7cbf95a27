"""Shared fixtures: small scenarios written to tmp_path, run helpers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import settings

from simulator.endpoints.base import Endpoint
from simulator.run.execute import execute
from simulator.run.spec import RunResult, RunSpec
from tests.engines_fixtures import (  # noqa: F401  (session fixtures)
    _smol_vllm_pair,
    llamacpp_server,
    smol_llamacpp,
    smol_vllm,
    smol_vllm_spec,
    vllm_server,
)

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"

# No per-example deadline (Hypothesis' default is 200 ms): on two shared cores, or two
# pytest-xdist workers, a slow example is the machine's load, not a failure; speed
# targets live in benchmarks/. Most property tests already said deadline=None.
settings.register_profile("endurance", deadline=None)
settings.load_profile("endurance")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist every test under tests/engines/ runs on one worker, one after
    another: the session-scoped vLLM and llama.cpp servers start once, and two engines
    never share the two cores. (xdist's `--dist loadgroup` would say this with a marker,
    but it renames `item._nodeid`, which pytest 9 no longer reads: the groups were
    silently ignored.) Every other test is its own scope, handed out as `--dist load`."""
    if config.getvalue("dist") not in ("load", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class EnginesTogether(LoadScopeScheduling):      # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return "tests/engines" if nodeid.startswith("tests/engines/") else nodeid

    return EnginesTogether(config, log)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist, install the engines in the controller, whose terminal the user sees
    (a worker's output is hidden: an install there looked like a hang, issue 57), in the
    background: the workers start on the tests that need no engine at once, and an engine
    test waits for its engine. Each phase and its elapsed time appear between the tests'
    reports."""
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None) \
            or config.option.collectonly:
        return
    from tests.engines_fixtures import BackgroundInstall, engines_in_files
    paths = [Path(a) for a in config.args] or [Path(config.rootpath) / "tests"]
    names = engines_in_files(paths, config.option.markexpr or "")
    if names:   # a plugin: it prints between reports and is waited for at the end
        config.pluginmanager.register(BackgroundInstall(names, _say(config)),
                                      "endurance-engines-install")


def _say(config: pytest.Config) -> Callable[[str], None]:
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            # xdist writes the progress dots itself: start a new line after them
            tw = getattr(reporter, "_tw", None)
            if tw is not None and getattr(tw, "width_of_current_line", 0):
                tw.line()
            reporter.write_line(line)
            reporter.flush()
        else:
            print(line, flush=True)
    return say


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests.engines_fixtures import engine_timeout
    for item in items:
        engine_timeout(item)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist, install the real engines the selected tests need before the first
    test starts, so pytest-timeout's per-test limit never cuts a build (issue 16). Under
    xdist the controller installs them (`pytest_sessionstart`): a worker's engine fixture
    waits for it."""
    if session.config.option.collectonly or hasattr(session.config, "workerinput"):
        return
    from tests.engines_fixtures import preinstall_engines
    preinstall_engines(session.items, _say(session.config))


def refused_in_one_line(args: list[str], *needles: str) -> str:
    """`endurance ARGS` ends in exit 2 and one `error: ` line holding every needle."""
    from click.testing import CliRunner

    from simulator.cli import main
    r = CliRunner().invoke(main, args)
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def small_scenario(**over: Any) -> dict[str, Any]:
    """A compact scenario that reaches compaction within a few dozen turns."""
    base: dict[str, Any] = {
        "name": "small", "sessions": 1, "turns": 30, "seed": 3,
        "system": {"tokens": 300}, "tools": {"count": 3, "tokens": 300},
        "first_prompt_tokens": 100, "user_prompt_tokens": 40, "think_time_s": 1.0,
        "turn_templates": [
            {"name": "read", "weight": 3, "output_tokens": 120,
             "tool": {"kind": "read", "result_tokens": 200, "latency_s": 0.1}},
            {"name": "edit", "weight": 1, "output_tokens": 150, "code_edit": True,
             "tool": {"kind": "edit", "result_tokens": 40, "latency_s": 0.05}},
            {"name": "answer", "weight": 1, "output_tokens": 100},
        ],
        "compaction": {"kind": "block", "high_water_tokens": 4000, "low_water_tokens": 2500,
                       "budget_tokens": 4000, "drop_messages": 2, "threshold_tokens": 4000,
                       "summary_max_tokens": 200, "keep_messages": 4, "trigger_tokens": 4000,
                       "keep_last": 2},
    }
    base.update(over)
    return base


@pytest.fixture
def write_scenario(tmp_path: Path):  # type: ignore[no-untyped-def]
    def write(data: dict[str, Any] | None = None, name: str = "s.yaml", text: str | None = None) -> Path:
        p = tmp_path / name
        p.write_text(text if text is not None else yaml.safe_dump(data or small_scenario()))
        return p
    return write


def run_scenario(path: Path, out: Path, overrides: list[str] | None = None,
                 endpoint: Endpoint | None = None, **kw: Any) -> RunResult:
    spec = RunSpec(str(path), overrides or [], out_dir=out, show_progress=False, **kw)
    return execute(spec, echo=lambda s: None, endpoint=endpoint)


def turns_of(result: RunResult) -> pd.DataFrame:
    return pd.read_parquet(result.run_dir / "turns.parquet")
