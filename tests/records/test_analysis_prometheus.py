"""Prometheus parsing of vLLM / SGLang / llama.cpp texts, windowed deltas, the scraper."""

from __future__ import annotations

import socket
from typing import Any

import pandas as pd
import pytest
from aiohttp import web

from simulator.analysis.summary import server_figures
from simulator.records.prometheus import (
    MetricsScraper,
    counter_delta,
    metrics_url_for,
    parse_metrics,
    window_rows,
)

VLLM = """\
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0",model_name="qwen"}} {q}
# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{engine="0",model_name="qwen"}} {h}
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{engine="0",model_name="qwen"}} {p}
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{{engine="0",model_name="qwen"}} {g}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="qwen"}} {kv}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="qwen"}} 3.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",num_gpu_blocks="10000",engine="0"}} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.5",model_name="qwen"}} 2.0
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="qwen"}} 3.0
vllm:time_to_first_token_seconds_count{{model_name="qwen"}} 3.0
vllm:time_to_first_token_seconds_sum{{model_name="qwen"}} 1.2
"""

SGLANG = """\
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 1000.0
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m"} 600.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.25
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.99
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 2
"""

LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {pt}
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total {ct}
llamacpp:tokens_predicted_total 6789
llamacpp:requests_processing 2
llamacpp:requests_deferred 1
llamacpp:n_tokens_max 32768
"""


def vllm(q: float, h: float, p: float = 0.0, g: float = 0.0, kv: float = 0.5) -> str:
    return VLLM.format(q=q, h=h, p=p, g=g, kv=kv)


def test_vllm_dialect_and_capacity() -> None:
    s = parse_metrics(vllm(1000, 400, 2, 50, 0.42))
    assert s.dialect == "vllm"
    assert s.counters == {"prefix_cache_queries": 1000, "prefix_cache_hits": 400,
                          "preemptions": 2, "generation_tokens": 50}
    assert s.gauges == {"kv_usage": 0.42, "requests_running": 3.0}
    assert s.info == {"kv_capacity_tokens": 160_000.0}


def test_sglang_ignores_cache_hit_rate_and_derives_queries() -> None:
    prev = parse_metrics(SGLANG)
    cur = parse_metrics(SGLANG.replace("1000.0", "1500.0").replace("600.0", "900.0"))
    assert cur.dialect == "sglang" and "cache_hit_rate" not in str(cur)
    rows = {(r["metric"], r["kind"]): r["value"] for r in window_rows(prev, cur, 0.0, 5.0)}
    assert rows[("prompt_tokens", "delta")] == 500
    assert rows[("prefix_cache_hits", "delta")] == 300
    assert rows[("prefix_cache_queries", "delta")] == 500
    assert rows[("kv_usage", "gauge")] == 0.25
    assert rows[("requests_waiting", "gauge")] == 2


def test_llamacpp_queries_add_cached_tokens() -> None:
    prev = parse_metrics(LLAMACPP.format(pt=100, ct=0))
    cur = parse_metrics(LLAMACPP.format(pt=300, ct=800))
    assert cur.dialect == "llamacpp"
    rows = {r["metric"]: r["value"] for r in window_rows(prev, cur, 0.0, 1.0)
            if r["kind"] == "delta"}
    # 200 evaluated + 800 served from the slot's cache = 1000 looked up
    assert rows["prefix_cache_queries"] == 1000 and rows["prefix_cache_hits"] == 800


def test_foreign_text_has_no_dialect() -> None:
    assert parse_metrics("# TYPE go_goroutines gauge\ngo_goroutines 12\n").dialect is None
    with pytest.raises(ValueError):
        parse_metrics("<html>not metrics</html>\n")


def test_baseline_has_no_counter_rows_and_reset_is_handled() -> None:
    a, b, c = (parse_metrics(vllm(1e6, 9e5, 7)), parse_metrics(vllm(1e6 + 1000, 9e5 + 600, 7)),
               parse_metrics(vllm(200, 50, 0)))
    base = window_rows(None, a, 0.0, 0.0)
    assert all(r["kind"] == "gauge" for r in base)   # no lifetime totals
    w1 = {r["metric"]: r["value"] for r in window_rows(a, b, 0.0, 2.0) if r["kind"] == "delta"}
    assert w1["prefix_cache_queries"] == 1000 and w1["prefix_cache_hits"] == 600
    w2 = {r["metric"]: r["value"] for r in window_rows(b, c, 2.0, 4.0) if r["kind"] == "delta"}
    assert w2["prefix_cache_queries"] == 200 and w2["prefix_cache_hits"] == 50  # restart
    assert counter_delta(10, 4) == 4 and counter_delta(4, 10) == 6
    df = pd.DataFrame(base + window_rows(a, b, 0.0, 2.0) + window_rows(b, c, 2.0, 4.0))
    figs = server_figures(df)
    assert figs["server_prefix_cache_hit_share"] == pytest.approx(650 / 1200)
    assert figs["preemptions"] == 0 and figs["kv_usage_peak"] == 0.5


def test_metrics_url() -> None:
    assert metrics_url_for("http://h:8000/v1/") == "http://h:8000/metrics"
    assert metrics_url_for("http://h:8000") == "http://h:8000/metrics"


async def _scraped(texts: list[str], **kw: Any) -> tuple[MetricsScraper, list[dict[str, Any]]]:
    """A scraper run over `texts`, one per scrape (it stops after the last)."""
    rows: list[dict[str, Any]] = []
    scraper: MetricsScraper

    async def fetch(url: str) -> tuple[int, str]:
        text = texts.pop(0)
        if not texts:
            scraper.stop()
        return 200, text

    scraper = MetricsScraper("http://x/metrics", 0.001, rows.extend, fetch=fetch, **kw)
    await scraper.run()
    return scraper, rows


async def test_scraper_windows_with_injected_fetch() -> None:
    ticks = iter(range(100))
    scraper, rows = await _scraped([vllm(100, 10), vllm(300, 110), vllm(600, 310)],
                                   clock=lambda: float(next(ticks)))
    assert scraper.windows == 2 and not scraper.notes
    q = [r["value"] for r in rows if r["metric"] == "prefix_cache_queries"]
    assert q == [200, 300]


async def test_missing_metrics_endpoint_is_a_note() -> None:
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        rows: list[dict[str, Any]] = []
        scraper = MetricsScraper(f"http://127.0.0.1:{port}/metrics", 0.01, rows.extend)
        await scraper.run()   # returns after the first 404, never raises
        assert rows == [] and "HTTP 404" in scraper.notes[0]
    finally:
        await runner.cleanup()


async def test_unreachable_endpoint_is_a_note() -> None:
    with socket.socket() as held:      # bound, never listening: refused, and ours meanwhile
        held.bind(("127.0.0.1", 0))
        scraper = MetricsScraper(f"http://127.0.0.1:{held.getsockname()[1]}/metrics", 0.01, print)
        await scraper.run()
    assert "scrape failed" in scraper.notes[0]


async def test_a_server_series_that_lies_is_left_out_not_the_server() -> None:
    """vLLM CPU 0.32 exposes `request_queue_time_seconds_sum` at -9033.87 after some
    requests (seen in the real-engine suite): that series is no measurement and is left
    out, named once, but the server's other series still make every window (the whole
    server scrape was dropped, and a real run lost all its server metrics)."""
    bad = ('# TYPE vllm:request_queue_time_seconds histogram\n'
           'vllm:request_queue_time_seconds_sum{engine="0",model_name="qwen"} -9033.87\n')
    scraper, rows = await _scraped([vllm(100, 10) + bad, vllm(300, 110) + bad,
                                    vllm(600, 310) + bad])
    assert scraper.windows == 2
    assert [r["value"] for r in rows if r["metric"] == "prefix_cache_queries"] == [200, 300]
    assert not any(r["metric"] == "queue_time_sum_s" for r in rows)
    assert len(scraper.notes) == 1 and "request_queue_time_seconds_sum" in scraper.notes[0]
    assert "left out" in scraper.notes[0]
    health = scraper.health()
    assert health["status"] == "ok" and "left out" in health["reason"]
