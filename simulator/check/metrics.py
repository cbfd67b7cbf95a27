"""Prometheus `/metrics` text → dialect and prefix-cache counters, for `check` (pure).

The parsing and the dialect table are the run scraper's (`metrics.prometheus`: vLLM,
SGLang, llama.cpp, mapped to one canonical vocabulary); this module only reads the two
prefix-cache counters `check` compares, in tokens:

| dialect  | cached tokens                 | prompt tokens                              |
|----------|-------------------------------|--------------------------------------------|
| vllm     | prefix_cache_hits             | prefix_cache_queries                       |
| sglang   | prefix_cache_hits (cached)    | prompt_tokens                              |
| llamacpp | prefix_cache_hits (cached)    | prompt_tokens + cached (it counts apart)   |
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.records import prometheus
from simulator.records.prometheus import DIALECTS


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Counters read from one scrape; `None` where the server does not export them."""

    dialect: str | None
    samples: int
    cached_tokens: float | None
    prompt_tokens: float | None
    block_size: int | None


def dialect_of(names: list[str] | set[str]) -> str | None:
    """The dialect whose prefix most sample names carry (None when none does)."""
    counts = {d: sum(n.startswith(d + ":") for n in names) for d in DIALECTS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else None


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse a scrape; raises ValueError when the text is not Prometheus exposition."""
    snap = prometheus.parse_metrics(text)
    dialect, c = snap.dialect, snap.counters
    cached = c.get("prefix_cache_hits") if dialect else None
    if dialect == "vllm":
        prompt = c.get("prefix_cache_queries")
    else:
        prompt = c.get("prompt_tokens") if dialect else None
        if dialect == "llamacpp" and prompt is not None:
            prompt += cached or 0.0   # llama.cpp's prompt counter excludes cached tokens
    block = snap.block_size or (1 if dialect == "llamacpp" else None)
    return MetricsSnapshot(dialect, snap.samples, cached, prompt, block)


def delta(before: float | None, after: float | None) -> float | None:
    """after − before, or None when either scrape lacks the counter."""
    if before is None or after is None:
        return None
    return after - before
