"""Twin vs real: the same shortened endurance scenario on vLLM (CPU, tiny model) and on
the in-process twin with the matching profile (`cpu-2core/tiny-llama-2l`, block size 32
as vLLM reports it); the per-turn cache-read share (cache_read_tokens / prompt_tokens)
must agree within 5 percentage points on every turn.

Shares, not counts: the twin tokenises with cl100k, the tiny model with its own
byte-level BPE. The scenario's `history: scripted` makes the client send both servers
byte-identical requests (with live history each server's reply text would feed back into
the context, so compaction would fire at different turns and the rows would not be
comparable). The vLLM runs are shared with tests/engines/test_real_engines_endurance.py (same
overrides → one run per policy per test session).
"""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.engines.server import EngineServer
from tests.conftest import run_scenario, turns_of
from tests.engines.test_real_engines_endurance import APIS, SCENARIO, api_extra, engine_run, overrides

pytestmark = pytest.mark.real_engine

TWIN = "cpu-2core/tiny-llama-2l"
TOLERANCE = 0.05     # share points, on every turn
KEYS = ["session_id", "turn_index"]


def _shares(turns: pd.DataFrame) -> pd.DataFrame:
    t = turns[(turns.request_kind == "turn") & turns.ok].copy()
    t["share"] = t.cache_read_tokens / t.prompt_tokens
    return t.set_index(KEYS).sort_index()[["context_tokens_est", "compaction", "prompt_tokens",
                              "cache_read_tokens", "share"]]


def comparison(twin: pd.DataFrame, real: pd.DataFrame) -> pd.DataFrame:
    """Per-turn shares side by side, with the absolute difference in share points."""
    tw, rl = _shares(twin), _shares(real)
    assert tw.index.equals(rl.index)
    # the client sent the same conversation to both (scripted history)
    assert tw.context_tokens_est.equals(rl.context_tokens_est)
    assert tw.compaction.fillna("").equals(rl.compaction.fillna(""))
    table = pd.DataFrame({
        "ctx_est": tw.context_tokens_est, "compaction": tw.compaction.fillna(""),
        "twin_prompt": tw.prompt_tokens, "twin_read": tw.cache_read_tokens,
        "real_prompt": rl.prompt_tokens, "real_read": rl.cache_read_tokens,
        "twin_share": tw.share, "real_share": rl.share})
    table["diff"] = (table.twin_share - table.real_share).abs()
    return table


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kind", ["block", "prune"])
def test_twin_cache_share_matches_vllm(vllm_server: EngineServer, kind: str, api: str,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    """Over either protocol (the OpenAI runs read cached_tokens)."""
    out = tmp_path_factory.mktemp(f"twin-vs-real-{kind}")
    real = engine_run(vllm_server, kind, out, api_extra(api))
    assert real.result.status == "completed", real.result.outcome.reason
    assert real.result.manifest.to_json()["scenario_resolved"]["history"] == "scripted"
    twin = run_scenario(SCENARIO, out, overrides(kind, api_extra(api)), twin=TWIN)
    assert twin.status == "completed"
    assert twin.summary["engine"]["block_size"] == vllm_server.block_size
    table = comparison(turns_of(twin), real.turns)
    with pd.option_context("display.width", 200, "display.max_rows", 500,
                           "display.float_format", "{:.3f}".format):
        print(f"\n[twin {TWIN} vs vLLM, {kind}] per-turn cache-read share\n{table}")
    print(f"[twin vs vLLM, {kind}] share difference: max {table['diff'].max():.4f}, "
          f"mean {table['diff'].mean():.4f} over {len(table)} turns")
    worst = table[table["diff"] > TOLERANCE]
    assert worst.empty, worst
