"""End-to-end runs on the in-process twin (virtual time): the issue-2 "done when"."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from tests.conftest import SCENARIOS, run_scenario, turns_of

ENDURANCE = SCENARIOS / "claude-code-endurance.yaml"


@pytest.fixture(scope="module")
def block_and_prune(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("runs")
    frames = {}
    for kind in ("block", "prune"):
        res = run_scenario(ENDURANCE, out, ["turns=60", f"compaction.kind={kind}"])
        assert res.status == "completed"
        frames[kind] = turns_of(res)
    return frames


def _drops(df: pd.DataFrame) -> pd.Series:
    """Turns whose reusable prefix fell below 60% of the previous turn's context."""
    t = df[df.request_kind == "turn"].sort_values("turn_index")
    return t.reusable_prefix_tokens < 0.6 * t.context_tokens_est.shift(1)


def test_block_context_grows_and_compacts(block_and_prune: dict[str, pd.DataFrame]) -> None:
    df = block_and_prune["block"]
    assert len(df) == 60 and df.ok.all()
    assert df.context_tokens_est.iloc[0] < 3500 and df.context_tokens_est.max() > 30_000
    events = df[df.compaction == "block"]
    assert len(events) >= 1
    assert (events.compaction_messages_removed >= 20).all()
    assert (events.context_tokens_est <= 19_000 + 4_000).all()
    # The prefix cache misses (client and server) only at compaction turns.
    drops = _drops(df)
    assert set(df[drops.reindex(df.index, fill_value=False)].turn_index) == set(events.turn_index)
    assert (df.loc[~drops.reindex(df.index, fill_value=False) & (df.turn_index > 0),
                   "cache_read_tokens"] > 0.8 * df.context_tokens_est.shift(1).dropna().min()).all()


def test_prune_destroys_the_prefix_every_turn(block_and_prune: dict[str, pd.DataFrame]) -> None:
    df = block_and_prune["prune"]
    pruned = df[df.compaction == "prune"]
    assert len(pruned) > 10
    assert (pruned.compaction_messages_removed % 2 == 0).all()
    assert (pruned.compaction_messages_removed == 2).mean() > 0.8
    # Once pruning has started, it fires on every turn and every turn's reusable
    # prefix collapses to the head.
    first = pruned.turn_index.min()
    after = df[df.turn_index >= first]
    assert len(after) == len(pruned)
    assert (after.reusable_prefix_tokens < 0.3 * after.context_tokens_est).all()
    assert (after.cache_read_tokens < 0.3 * after.prompt_tokens).all()
    block = block_and_prune["block"]
    assert block.turn_tok_s.median() > 1.1 * after.turn_tok_s.median()


def test_client_reusable_is_never_below_server_reuse(block_and_prune: dict[str, pd.DataFrame]) -> None:
    for df in block_and_prune.values():
        # Client estimates (cl100k + framing) vs the twin's block-granular hits.
        slack = 16 + 0.03 * df.context_tokens_est
        assert (df.reusable_prefix_tokens + slack >= df.cache_read_tokens).all()


def test_results_directory_is_complete_and_labelled_simulated(tmp_path: Path) -> None:
    res = run_scenario(ENDURANCE, tmp_path, ["turns=12"], label="smoke")
    files = {p.name for p in res.run_dir.iterdir()}
    assert {"turns.parquet", "manifest.json", "summary.json", "turns.jsonl"} <= files
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert manifest["status"] == "completed" and manifest["simulated"] is True
    assert manifest["endpoint"]["hardware"] == "a40" and manifest["label"] == "smoke"
    assert manifest["scenario_hash"] and manifest["seed"] == 7
    assert summary["simulated"] is True and summary["ok_turns"] == 12
    assert summary["usd_per_mtok"] > 0


def test_cli_run_prints_the_run_dir_last(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", str(ENDURANCE), "--turns", "5", "--out", str(tmp_path),
                                  "--twin", "h100/llama-3.1-8b"])
    assert r.exit_code == 0, r.output
    last = r.output.strip().splitlines()[-1]
    assert Path(last).is_dir() and Path(last).parent == tmp_path
    assert "SIMULATED" in r.output


def test_unknown_twin_profile_is_an_input_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", str(ENDURANCE), "--turns", "2", "--out", str(tmp_path),
                                  "--twin", "a40/nope"])
    assert r.exit_code == 2 and "nope" in r.output and "qwen3-coder-30b-a3b-awq" in r.output
    assert not list(tmp_path.iterdir())  # no results directory was started


def test_same_seed_same_turns(tmp_path: Path) -> None:
    a = turns_of(run_scenario(ENDURANCE, tmp_path, ["turns=15"]))
    b = turns_of(run_scenario(ENDURANCE, tmp_path, ["turns=15"]))
    cols = ["turn_kind", "context_tokens_est", "output_tokens", "cache_read_tokens", "ttft_s"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_a_run_id_already_taken_in_out_is_drawn_again(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs started in the same second into one --out (a search's parallel points,
    runs launched from a script) can draw the same id; the second takes another one
    instead of failing with 'cannot create the results directory (File exists)'."""
    import simulator.run.prepare as prepare
    ids = iter(["20261203-170034-claude-code-team-4bbb"] * 3 + ["20261203-170034-claude-code-team-5ccc"])
    monkeypatch.setattr(prepare, "new_run_id", lambda _name, _label=None: next(ids))
    team = SCENARIOS / "claude-code-team.yaml"
    first = run_scenario(team, tmp_path, ["sessions=1", "turns=1"])
    second = run_scenario(team, tmp_path, ["sessions=1", "turns=1"])
    assert first.status == second.status == "completed"
    assert first.run_dir.name.endswith("4bbb") and second.run_dir.name.endswith("5ccc")
    manifest = json.loads((second.run_dir / "manifest.json").read_text())
    assert manifest["run_id"] == second.run_dir.name
    assert len(turns_of(first)) == len(turns_of(second)) == 1
