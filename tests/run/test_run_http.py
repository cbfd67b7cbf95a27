"""The real HTTP path: the SDK and lean clients against the HTTP twin on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import SCENARIOS, run_scenario, turns_of
from tests.http_twin import twin_server

ENDURANCE = SCENARIOS / "claude-code-endurance.yaml"
# No think time or tool latency: the server's (compressed) time is all there is.
FAST = ["think_time_s=0", *(f"turn_templates.{i}.tool.latency_s=0" for i in range(5))]


@pytest.mark.slow
def test_endurance_over_http_block_vs_prune(tmp_path: Path) -> None:
    """The issue-2 acceptance run, on the default (lean) client; the SDK path is held
    to identical records by the test below."""
    client = "lean"
    frames = {}
    with twin_server(time_scale=2000.0, log=tmp_path / "twin.log") as url:
        for kind in ("block", "prune"):
            res = run_scenario(ENDURANCE, tmp_path, ["turns=60", f"compaction.kind={kind}",
                                                     "seed=5", *FAST],
                               endpoint_url=url, client=client)
            assert res.status == "completed", res.outcome.reason
            assert res.manifest.simulated is True  # the HTTP twin announces itself
            assert res.manifest.endpoint.url == url
            frames[kind] = turns_of(res)
    block, prune = frames["block"], frames["prune"]
    for df in (block, prune):
        assert len(df) == 60 and df.ok.all()
        assert df.context_tokens_est.max() > 30_000
        assert df.cache_read_tokens.notna().all() and (df.ttft_s > 0).all()
    # Server-reported cache reads: collapse at block's compaction turns only …
    b = block.set_index("turn_index")
    drops = b.cache_read_tokens < 0.5 * b.prompt_tokens
    compacted = b.compaction.eq("block")
    assert compacted.sum() >= 1
    assert set(b.index[drops & (b.index > 0)]) == set(b.index[compacted])
    # … and on every turn once prune has started.
    p = prune.set_index("turn_index")
    started = p.index[p.compaction.eq("prune")].min()
    after = p.loc[started:]
    assert (after.cache_read_tokens < 0.3 * after.prompt_tokens).all()
    assert (after.reusable_prefix_tokens < 0.3 * after.context_tokens_est).all()


@pytest.mark.slow
def test_lean_and_sdk_record_the_same_turns(tmp_path: Path) -> None:
    with twin_server(time_scale=2000.0) as url:
        runs = [turns_of(run_scenario(ENDURANCE, tmp_path, ["turns=8", *FAST],
                                      endpoint_url=url, client=c)) for c in ("sdk", "lean")]
    cols = ["turn_index", "context_tokens_est", "reusable_prefix_tokens", "prompt_tokens",
            "output_tokens", "stop_reason"]
    pd.testing.assert_frame_equal(runs[0][cols], runs[1][cols])
