"""The endurance scenario, shortened, against real engines (vLLM on the CPU, llama.cpp's
llama-server) under `block` and `prune` compaction.

What must hold on a real server, whatever its tokenizer:
- server-reported cache reads collapse at every turn once `prune` has started, and only
  at the compaction turns under `block`;
- the client-side reusable prefix is never below what the server reports reused, beyond
  one block (compared as *shares*: the client counts cl100k estimates, the server its own
  tokenizer's tokens);
- /metrics prefix-cache hits over the run match Σ `cache_read_input_tokens` within one
  block per request;
- no request is lost (rows == requests the server counted);
- the summary and `endurance report` render.
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from simulator.cli import main
from simulator.engines.server import EngineServer
from simulator.report.console import format_summary
from simulator.run.spec import RunResult
from tests.conftest import run_scenario, turns_of

pytestmark = pytest.mark.real_engine

SCENARIO = Path(__file__).resolve().parents[1] / "fixtures" / "real-engine-endurance.yaml"
SESSIONS, TURNS = 2, 36
COLLAPSE = 0.5      # mean cache-read share of the turns where the prefix broke
# One seed per policy: the system prompt and tools derive from the seed, and the servers
# live for the whole test session, so a second run with the same seed would find its
# prefix already cached at turn 0 (the client, starting afresh, cannot know that).
SEEDS = {"block": 7, "prune": 11}
# Each protocol runs once per policy (issue 18): OpenAI runs get their own seeds (+100)
# for the same reason, since they share the session's servers with the Anthropic runs.
APIS = ["anthropic", "openai-chat"]
# (kind, api): by default vLLM runs each policy once and each protocol once, llama.cpp
# (the slower here, ~3 min a run) the first pair; the rest is the campaign
# (`pytest -m campaign`: minutes of a real server each)
CAMPAIGN = pytest.mark.campaign
PAIRS = [pytest.param("block", "anthropic"),
         pytest.param("block", "openai-chat", marks=CAMPAIGN),
         pytest.param("prune", "anthropic", marks=CAMPAIGN),
         pytest.param("prune", "openai-chat")]
# `_check_client_bound`'s slack: (blocks, extra tokens) per protocol.
SLACK = {"anthropic": (1, 0), "openai-chat": (3, 16)}


def api_extra(api: str) -> tuple[str, ...]:
    """The overrides selecting `api` (none for the default, Anthropic)."""
    return () if api == "anthropic" else (f"endpoint.api={api}",)


def overrides(kind: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The --set overrides of one run (the twin-vs-real test uses the same ones)."""
    seed = SEEDS[kind] + (100 if "endpoint.api=openai-chat" in extra else 0)
    return [f"compaction.kind={kind}", f"seed={seed}", *extra]


@dataclass(frozen=True)
class EngineRun:
    """One run of the shortened scenario on a real engine, with raw /metrics around it."""

    result: RunResult
    turns: pd.DataFrame
    server: pd.DataFrame            # server_metrics.parquet (scraper windows)
    before: dict[str, float]        # raw /metrics samples (name → Σ over label sets)
    after: dict[str, float]
    wall_s: float

    def delta(self, name: str) -> float:
        return self.after[name] - self.before[name]

    def window_sum(self, metric: str) -> float:
        d = self.server[(self.server.kind == "delta") & (self.server.metric == metric)]
        return float(d.value.sum())


_RUNS: dict[tuple[str, str, tuple[str, ...]], EngineRun] = {}


def raw_metrics(url: str) -> dict[str, float]:
    """Every sample of a /metrics page, summed over label sets (counters as totals)."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


def engine_run(server: EngineServer, kind: str, out: Path,
               extra: tuple[str, ...] = ()) -> EngineRun:
    """Run the shortened scenario once per (server, policy, overrides) per test session:
    the twin-vs-real test reuses the runs of this module when the overrides match."""
    key = (server.base_url, kind, extra)
    if key not in _RUNS:
        before = raw_metrics(server.metrics_url)
        t0 = time.monotonic()
        res = run_scenario(SCENARIO, out, [*overrides(kind, extra), f"model={server.model}"],
                           endpoint_url=server.base_url, client="lean")
        wall = time.monotonic() - t0
        after = raw_metrics(server.metrics_url)
        metrics = res.run_dir / "server_metrics.parquet"
        _RUNS[key] = EngineRun(res, turns_of(res), pd.read_parquet(metrics)
                               if metrics.exists() else pd.DataFrame(), before, after, wall)
        print(f"\n[{server.engine}/{kind}] {len(_RUNS[key].turns)} requests in {wall:.1f} s")
    return _RUNS[key]


def _turn_rows(run: EngineRun) -> pd.DataFrame:
    """Successful turns whose usage the server reported (see `_check_complete`)."""
    t = run.turns
    t = t[(t.request_kind == "turn") & t.ok & t.prompt_tokens.notna()]
    return t.sort_values(["session_id", "turn_index"])


def _check_complete(run: EngineRun, *, max_missing_usage: float = 0.0,
                    max_stream_errors: int = 0) -> int:
    """Every turn is one successful row, with no summary request. Returns how many rows
    lack server usage: llama.cpp omits `message_start` (and with it the prompt usage) when
    the first generated token is an incomplete UTF-8 sequence — random weights make
    that happen now and then; the client records such usage as unknown, never zero.
    `max_stream_errors`: llama.cpp now and then ends a stream with an `error` event after
    HTTP 200; the client records that attempt as failed (`stream_error`) and retries the
    turn, so such a turn has one failed row and one successful one. A stream that omits
    `message_start` breaks the Messages grammar (issue 29): since the grammar is
    enforced that attempt is a failed `malformed_stream` row ("… before message_start")
    and the turn is retried, so those count against the same share as missing usage."""
    assert run.result.status == "completed", run.result.outcome.reason
    t = run.turns
    failed = t[~t.ok]
    omitted_start = (failed.error_type == "malformed_stream") & \
        failed.error_message.fillna("").str.contains("before message_start")
    allowed = max_stream_errors + int(max_missing_usage * SESSIONS * TURNS)
    assert len(failed) <= allowed and ((failed.error_type == "stream_error") | omitted_start).all(), \
        failed[["session_id", "turn_index", "attempt", "error_type", "error_message"]]
    t = t[t.ok]
    assert len(t) == SESSIONS * TURNS, "a summary request or a lost turn"
    assert not t.duplicated(["session_id", "turn_index"]).any()
    assert (t.attempt == 1).all() or max_stream_errors > 0
    assert t.session_id.nunique() == SESSIONS
    missing = int(t.prompt_tokens.isna().sum())
    assert missing <= max_missing_usage * len(t), missing
    assert (t.cache_read_tokens.isna() == t.prompt_tokens.isna()).all()
    known = t[t.prompt_tokens.notna()]
    assert (known.prompt_tokens > 0).all() and (t.output_tokens > 0).all()
    return missing


def _check_collapse(run: EngineRun, kind: str, block: int, *, per_slot: bool = False) -> None:
    """Cache reads collapse exactly where the client's compaction broke the prefix.

    With scripted history each request extends the previous one, so a turn *keeps* the
    cache when the server reads the whole previous prompt (less one block of rounding,
    one of re-tokenisation at the join, and a few tokens for a per-token cache); any
    other turn is *broken*. What survives a break is the pinned head (system, tools, the
    session's first prompt): the same amount at every break of a session."""
    slack = 2 * block + 4
    for sid, s in _turn_rows(run).groupby("session_id"):
        s = s.set_index("turn_index")
        # Judge a turn only against the turn just before it (usage may be missing), and
        # not a retried turn: its failed attempt already left this prompt in the cache.
        idx = s.index.to_series()
        rows = run.turns[run.turns.session_id == sid]
        retried = set(rows[~rows.ok.astype(bool)].turn_index)
        judged = idx.diff().eq(1) & ~idx.isin(retried)
        prev = s.prompt_tokens.shift(1)
        broken = (s.cache_read_tokens < prev - slack) & judged
        fired = s.compaction.eq(kind) & judged
        # The client's own record counts every compaction; a turn next to one whose
        # usage is missing (llama.cpp, see _check_complete) cannot be judged, so the
        # count comes from all of the session's rows, the comparison from judged ones.
        every = run.turns[run.turns.session_id == sid].compaction.eq(kind).sum()
        assert every >= (2 if kind == "block" else TURNS // 3), (sid, every)
        assert fired.any(), (sid, "no compaction turn could be judged")
        if kind == "block":
            assert set(s.index[broken]) == set(s.index[fired]), sid
        else:
            started = s.index[fired].min()
            assert broken.loc[started:][judged.loc[started:]].all(), sid
            assert not broken.loc[:started - 1].any(), sid
        reads = s.cache_read_tokens[broken]
        if not per_slot:  # one shared cache: every break reads exactly the pinned head
            assert reads.max() - reads.min() <= slack, (sid, sorted(set(reads)))
        # llama.cpp keeps a cache per slot and picks an idle slot by prompt similarity,
        # so a break reads the pinned head, part of it (another session's slot shares
        # the system prompt and tools) or nothing, depending on which slots were free;
        # `_check_client_bound` still caps every read at what the client could reuse.
        assert (reads / s.prompt_tokens[broken]).mean() < COLLAPSE, sid


def _check_client_bound(run: EngineRun, block: int,
                        slack_of: tuple[int, int] = (1, 0)) -> None:
    """Client reusable share ≥ server cache-read share − slack (`slack_of`: blocks and
    extra tokens) of the prompt.

    Counts are in different tokenizers (cl100k estimates vs the engine's own BPE), so
    shares are compared; the server may legitimately round its hit down to a block (so
    its share is lower — never a failure), and one block of slack absorbs the chat
    template's own framing tokens at the start of the prompt. Over OpenAI Chat the
    server renders the request itself (tools wrapped as `function` objects, the system
    text as a message, each tool result as its own `tool` message), so its prompt holds
    more framing than the client counts: in the first runs one turn of 72 read more than
    one block above the client's share on vLLM (a compaction turn of a 2.4k-token
    prompt), and on llama.cpp (block size 1) one turn read 4 tokens above it (3126 of
    3165 vs 2603 of 2639), hence 3 blocks + 16 tokens there."""
    t = _turn_rows(run)
    client = t.reusable_prefix_tokens / t.context_tokens_est
    server = t.cache_read_tokens / t.prompt_tokens
    blocks, extra = slack_of
    slack = (blocks * block + extra) / t.prompt_tokens
    bad = t.assign(client_share=client, server_share=server)[client < server - slack]
    assert bad.empty, bad[["session_id", "turn_index", "reusable_prefix_tokens",
                           "context_tokens_est", "cache_read_tokens", "prompt_tokens",
                           "client_share", "server_share"]].to_string()


def _check_summary_and_report(run: EngineRun) -> None:
    text = format_summary(run.result.summary)
    assert "compaction" in text.lower() and str(SESSIONS * TURNS) in text
    res = CliRunner().invoke(main, ["report", str(run.result.run_dir)])
    assert res.exit_code == 0, res.output
    assert (run.result.run_dir / "report.html").stat().st_size > 0


@pytest.mark.parametrize(("kind", "api"), PAIRS)
def test_vllm_endurance(vllm_server: EngineServer, kind: str, api: str,
                        tmp_path_factory: pytest.TempPathFactory) -> None:
    run = engine_run(vllm_server, kind, tmp_path_factory.mktemp(f"vllm-{kind}"),
                     api_extra(api))
    _check_complete(run)
    _check_collapse(run, kind, vllm_server.block_size)
    _check_client_bound(run, vllm_server.block_size, SLACK[api])
    t = run.turns
    # every request the client recorded, the server counted as a success, and nothing else
    assert run.delta("vllm:request_success_total") == len(t)
    assert run.delta("vllm:prompt_tokens_total") == t.prompt_tokens.sum()
    # the scraper's windows cover the whole run and agree with the raw before/after
    assert run.window_sum("prompt_tokens") == run.delta("vllm:prompt_tokens_total")
    hits = run.window_sum("prefix_cache_hits")
    assert hits == run.delta("vllm:prefix_cache_hits_total")
    assert abs(hits - t.cache_read_tokens.sum()) <= vllm_server.block_size * len(t)
    _check_summary_and_report(run)


@pytest.mark.parametrize(("kind", "api"), [
    PAIRS[0], *(pytest.param(*p.values, marks=CAMPAIGN) for p in PAIRS[1:])])
def test_llamacpp_endurance(llamacpp_server: EngineServer, kind: str, api: str,
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    run = engine_run(llamacpp_server, kind, tmp_path_factory.mktemp(f"llamacpp-{kind}"),
                     api_extra(api))
    missing = _check_complete(run, max_missing_usage=0.15, max_stream_errors=2)
    _check_collapse(run, kind, llamacpp_server.block_size, per_slot=True)
    _check_client_bound(run, llamacpp_server.block_size, SLACK[api])
    t = run.turns[run.turns.ok]
    errored = int((~run.turns.ok).sum())      # streams llama.cpp ended with an error event
    # llama.cpp has no request counter: every prompt token the client was billed for
    # was processed (uncached) or reused (cached), and every output token was predicted
    assert "llamacpp:requests_total" not in run.after
    processed = run.delta("llamacpp:prompt_tokens_total")
    cached = run.delta("llamacpp:prompt_tokens_cached_total")
    predicted = run.delta("llamacpp:tokens_predicted_total")
    assert predicted == t.output_tokens.sum() if not errored else predicted >= t.output_tokens.sum()
    hits = run.window_sum("prefix_cache_hits")
    assert hits == cached
    if missing == 0 and not errored:
        assert processed + cached == t.prompt_tokens.sum()
        assert abs(hits - t.cache_read_tokens.sum()) <= llamacpp_server.block_size * len(t)
    else:  # the counters also hold the prompts whose usage the stream left out
        assert processed + cached > t.prompt_tokens.sum()
        assert cached >= t.cache_read_tokens.sum()
    _check_summary_and_report(run)
