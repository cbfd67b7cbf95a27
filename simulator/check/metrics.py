"""Prometheus `/metrics` text → dialect and prefix-cache counters (pure, no I/O).

Three dialects are known: vLLM (`vllm:`), SGLang (`sglang:`) and llama.cpp
(`llamacpp:`). Each counts prefix-cache reuse in tokens, under different names:

| dialect  | cached tokens (counter)             | prompt tokens (counter)            |
|----------|-------------------------------------|------------------------------------|
| vllm     | vllm:prefix_cache_hits_total        | vllm:prefix_cache_queries_total    |
| sglang   | sglang:cached_tokens_total          | sglang:prompt_tokens_total         |
| llamacpp | llamacpp:prompt_tokens_cached_total | llamacpp:prompt_tokens_total (+ cached) |
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

DIALECTS = ("vllm", "sglang", "llamacpp")
_CACHED = {"vllm": "vllm:prefix_cache_hits_total",
           "sglang": "sglang:cached_tokens_total",
           "llamacpp": "llamacpp:prompt_tokens_cached_total"}
_PROMPT = {"vllm": "vllm:prefix_cache_queries_total",
           "sglang": "sglang:prompt_tokens_total",
           "llamacpp": "llamacpp:prompt_tokens_total"}


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Counters read from one scrape; `None` where the server does not export them."""

    dialect: str | None
    samples: int
    cached_tokens: float | None
    prompt_tokens: float | None
    block_size: int | None


def _sums(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Sum of every sample per name (over labels), and vLLM's cache_config_info labels."""
    sums: dict[str, float] = {}
    info: dict[str, str] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            sums[s.name] = sums.get(s.name, 0.0) + float(s.value)
            if s.name.endswith("cache_config_info"):
                info.update(s.labels)
    return sums, info


def dialect_of(names: list[str] | set[str]) -> str | None:
    """The dialect whose prefix most sample names carry (None when none does)."""
    counts = {d: sum(n.startswith(d + ":") for n in names) for d in DIALECTS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else None


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse a scrape; raises ValueError when the text is not Prometheus exposition."""
    sums, info = _sums(text)
    dialect = dialect_of(set(sums))
    cached = sums.get(_CACHED[dialect]) if dialect else None
    prompt = sums.get(_PROMPT[dialect]) if dialect else None
    if dialect == "llamacpp" and prompt is not None:
        prompt += cached or 0.0   # llama.cpp's prompt counter excludes cached tokens
    bs = info.get("block_size")
    block = int(bs) if bs and bs.isdigit() else (1 if dialect == "llamacpp" else None)
    return MetricsSnapshot(dialect, len(sums), cached, prompt, block)


def delta(before: float | None, after: float | None) -> float | None:
    """after − before, or None when either scrape lacks the counter."""
    if before is None or after is None:
        return None
    return after - before
