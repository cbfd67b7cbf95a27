"""The recall scenario (shortened: tests/fixtures/real-model-recall.yaml) on the real
small model, on llama.cpp and on vLLM CPU, under none, block and summarize — the
summaries written by the model itself.

What must hold whatever the model answers:
- retention exactly as the policy implies: `none` keeps every fact verbatim; a fact no
  compaction has crossed is verbatim; block never yields a summary state; a dropped fact
  stays dropped; a fact in the `summary` state is in the text of the summary the model
  wrote (history.jsonl);
- recall of dropped facts at chance: values are unique per session, so no probe of a
  dropped fact may name it;
- every probe recorded: after each turn that followed a compaction, one probe per fact
  planted by then, and one per fact at the end, each answered.
The recall itself (a 135M model's) is printed, not asserted. The twin of this machine
runs the same checks (and there recall = retention, by construction).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from simulator.engines.server import EngineServer
from simulator.run.spec import RunResult
from simulator.session.recall import entered_turn
from tests.conftest import run_scenario, turns_of

SCENARIO = Path(__file__).resolve().parents[1] / "fixtures" / "real-model-recall.yaml"
ENGINES = ["smol_llamacpp", "smol_vllm"]
POLICIES = ["none", "block", "summarize"]
# one seed per policy: the servers live for the whole session, so a second run with the
# same seed would find its system prompt already cached at turn 0
SEEDS = {"none": 7, "block": 8, "summarize": 9}

_RUNS: dict[tuple[str, str], tuple[RunResult, float]] = {}


def recall_run(server: EngineServer, kind: str, out: Path) -> tuple[RunResult, float]:
    """One run per (server, policy) per test session; (result, wall seconds)."""
    key = (server.base_url, kind)
    if key not in _RUNS:
        t0 = time.monotonic()
        res = run_scenario(SCENARIO, out, [f"compaction.kind={kind}", f"seed={SEEDS[kind]}",
                                           f"model={server.model}"],
                           endpoint_url=server.base_url, client="lean")
        _RUNS[key] = (res, time.monotonic() - t0)
    return _RUNS[key]


def _summaries(run_dir: Path) -> list[tuple[int, str]]:
    """(turn, text) of every summary the model wrote, in order."""
    out = []
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("kind") == "summary":
            out.append((int(row["turn"]), "".join(str(b[1]) for b in row["content"]
                                                  if b and b[0] == "text")))
    return out


def _check_schedule(turns: pd.DataFrame, probes: pd.DataFrame) -> None:
    """Every probe the schedule implies is there, once, answered."""
    last = int(turns.turn_index.max())
    at_end = probes[probes.turn_index == last]
    assert len(at_end) == 5 and at_end.fact_id.is_unique          # 4 drawn + 1 chosen
    entered = {r.fact_id: entered_turn(r.fact_kind, int(r.fact_turn))
               for r in at_end.itertuples()}
    after = sorted(int(t) for t in turns[turns.compaction.notna()].turn_index)
    for t in [*after, last]:
        asked = set(probes[probes.turn_index == t].fact_id)
        assert asked == {f for f, first in entered.items() if first <= t}, (t, asked)
    assert not probes.duplicated(["turn_index", "fact_id"]).any()
    assert probes.ok.all() and probes.probe_correct.notna().all()
    assert probes.probe_reply.notna().all()


@pytest.mark.slow
@pytest.mark.parametrize("kind", POLICIES)
def test_recall_scenario_on_the_twin(kind: str, tmp_path: Path) -> None:
    """The same checks on the twin of this machine (recall = retention there)."""
    res = run_scenario(SCENARIO, tmp_path, [f"compaction.kind={kind}", f"seed={SEEDS[kind]}"],
                       twin="cpu-2core/smollm2-135m")
    check_recall_run(res, kind, f"twin/{kind}", 0.0)
    probes = turns_of(res).query("request_kind == 'probe'")
    assert (probes.probe_correct == (probes.fact_retained != "dropped")).all()


@pytest.mark.real_engine
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("engine", "kind"), [
    # by default one engine and one policy; the rest is the campaign (`-m campaign`)
    (e, k) if (e, k) == ("smol_llamacpp", "block") else
    pytest.param(e, k, marks=pytest.mark.campaign) for e in ENGINES for k in POLICIES])
def test_recall_scenario_on_the_real_model(engine: str, kind: str,
                                           request: pytest.FixtureRequest,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    server: EngineServer = request.getfixturevalue(engine)
    res, wall = recall_run(server, kind, tmp_path_factory.mktemp(f"recall-{kind}"))
    check_recall_run(res, kind, f"{server.engine}/{kind}", wall)


def check_recall_run(res: RunResult, kind: str, label: str, wall: float) -> None:
    """The properties of the module docstring, on one run."""
    assert res.status == "completed", res.outcome.reason
    rows = turns_of(res)
    turns = rows[rows.request_kind == "turn"]
    probes = rows[rows.request_kind == "probe"].sort_values(["turn_index", "fact_id"])
    s = res.summary
    print(f"\n[{label}] {len(turns)} turns, {len(probes)} probes in {wall:.0f} s;"
          f" sustained {s.get('per_session_tok_s') or 0:.1f} tok/s, server cache read "
          f"{100 * (s.get('server_cache_read_share') or 0):.1f}%, retention "
          f"{s.get('fact_retention')}, recall {s.get('probe_recall')} "
          f"[{s.get('probe_recall_ci_low')}, {s.get('probe_recall_ci_high')}]",
          file=sys.stderr)
    assert turns.ok.all() and len(turns) == 16
    _check_schedule(turns, probes)

    state = probes.fact_retained
    assert set(state) <= {"verbatim", "summary", "dropped"}
    assert (state[probes.fact_compactions_crossed == 0] == "verbatim").all()
    if kind == "none":
        assert turns.compaction.isna().all() and (state == "verbatim").all()
    else:
        assert (turns.compaction.dropna() == kind).all() and turns.compaction.notna().any()
    if kind == "block":
        assert "summary" not in set(state)
    for _, per_fact in probes.groupby("fact_id"):   # dropped stays dropped
        seen = list(per_fact.sort_values("turn_index").fact_retained)
        assert "dropped" not in seen or set(seen[seen.index("dropped"):]) == {"dropped"}
    if kind == "summarize":
        summaries = _summaries(res.run_dir)
        assert len(summaries) == int(turns.compaction.notna().sum())
        for _, p in probes[state == "summary"].iterrows():
            text = next(t for turn, t in reversed(summaries) if turn <= p.turn_index)
            assert str(p.probe_expected).lower() in text.lower()
    # recall of what the context no longer holds: unique values, so chance is ~0
    assert not probes[state == "dropped"].probe_correct.astype(bool).any()
