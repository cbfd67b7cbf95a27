"""Recall probes on the in-process twin: side requests that never change the turns,
answered from the prompt (recall = retention), facts unique per session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulator.protocol.facts import FACT_KINDS
from simulator.scenario.load import load_scenario
from simulator.session.prefix import build_base_prefix
from tests.conftest import run_scenario, small_scenario, turns_of

# Fields that depend on when things happened, not on what was sent or received.
TIMING = {"run_id", "started_at", "started_mono_s", "ttft_s", "decode_tok_s", "turn_tok_s",
          "e2e_s", "queue_s", "schedule_lag_s", "first_chunk_s"}
PROBES: dict[str, Any] = {"facts": 8, "plant_between": [0.0, 0.7], "every_turns": 6}
QUIET: dict[str, Any] = {**PROBES, "every_turns": None, "after_compaction": False,
                         "at_end": False}


_CACHE: dict[tuple[str, str, int], pd.DataFrame] = {}


def _run(tmp_path: Path, name: str, kind: str, probes: dict[str, Any],
         sessions: int = 2) -> pd.DataFrame:
    """The twin run of the small scenario under `kind` (runs are deterministic: one run
    per (probes, kind, sessions) serves every test of this module)."""
    key = (json.dumps(probes, sort_keys=True), kind, sessions)
    if key not in _CACHE:
        data = small_scenario(turns=40, sessions=sessions, probes=probes)
        data["compaction"]["kind"] = kind
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        _CACHE[key] = turns_of(run_scenario(path, tmp_path / name))
    return _CACHE[key]


def _timing_free(df: pd.DataFrame) -> list[dict[str, Any]]:
    rows = df[df["request_kind"] != "probe"].drop(columns=[c for c in TIMING if c in df])
    rows = rows.sort_values(["session_id", "turn_index", "request_kind", "attempt"])
    return [{k: (None if pd.isna(v) else v) for k, v in r.items()}
            for r in rows.to_dict("records")]


@pytest.mark.parametrize("kind", [pytest.param("none", marks=pytest.mark.slow),
                                  pytest.param("prune", marks=pytest.mark.slow),
                                  pytest.param("clear_tool_results", marks=pytest.mark.slow),
                                  "block", "summarize"])
def test_probes_never_change_the_turn_rows(tmp_path: Path, kind: str) -> None:
    asked = _run(tmp_path, "asked", kind, PROBES)
    quiet = _run(tmp_path, "quiet", kind, QUIET)
    assert (asked["request_kind"] == "probe").sum() > 0
    assert (quiet["request_kind"] == "probe").sum() == 0
    assert _timing_free(asked) == _timing_free(quiet)


@pytest.mark.parametrize("kind", ["none", "block", "summarize", "clear_tool_results"])
def test_twin_recall_equals_retention(tmp_path: Path, kind: str) -> None:
    df = _run(tmp_path, "r", kind, PROBES)
    p = df[df["request_kind"] == "probe"]
    assert len(p) > 0 and p["ok"].all()
    retained = p["fact_retained"] != "dropped"
    assert (p["probe_correct"].astype(bool) == retained).all()
    assert set(p["fact_kind"]) <= set(FACT_KINDS)
    assert (p["fact_age_turns"] == p["turn_index"] - p["fact_turn"]).all()
    if kind == "none":
        assert (p["fact_retained"] == "verbatim").all()
        assert (p["fact_compactions_crossed"] == 0).all()
    if kind == "summarize":
        kept = p[p["fact_retained"] == "summary"]
        assert len(kept) > 0
        assert set(kept["fact_kind"]) <= {"user_value", "decision"}   # what the twin keeps
        said = p[p["fact_kind"].isin(["user_value", "decision"])]
        assert len(said) > 0 and (said["fact_retained"] != "dropped").all()
    if kind in ("block", "clear_tool_results"):
        assert (p["fact_retained"] == "dropped").any()
        assert not (p["fact_retained"] == "summary").any()


def test_probes_ride_the_prefix_cache(tmp_path: Path) -> None:
    p = _run(tmp_path, "r", "block", PROBES)
    p = p[p["request_kind"] == "probe"]
    share = p["cache_read_tokens"].sum() / p["prompt_tokens"].sum()
    assert share > 0.9


def test_facts_unique_per_session(tmp_path: Path) -> None:
    df = _run(tmp_path, "u", "none", PROBES, sessions=3)
    p = df[df["request_kind"] == "probe"]
    per_value = p.groupby("probe_expected")["session_id"].nunique()
    assert (per_value == 1).all()
    assert p["session_id"].nunique() == 3
    # the twin answers right only from its own session's context
    assert p["probe_correct"].astype(bool).all()
    # and no fact rides in the prefix every session shares
    scenario, _ = load_scenario(str(tmp_path / "u.yaml"))
    prefix = build_base_prefix(scenario)
    shared = prefix.system + json.dumps(list(prefix.tools))
    assert not any(v in shared for v in p["probe_expected"])
