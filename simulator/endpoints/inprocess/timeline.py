"""The in-process twin's engine log: KV usage, running/waiting requests and counter
deltas sampled every `interval_s` simulated seconds, as `server_metrics` rows.

A run against a real server scrapes its `/metrics` every 5 s into
`server_metrics.parquet`; the in-process twin has no HTTP server, so its engine is
sampled from the driver loop instead (reading state only: sampling never changes what
the engine computes) and the same rows are written, with dialect `twin`. The report's
timeline page reads either.

It lives beside the in-process twin's endpoint, not in `twin/`: it speaks the
scraper's vocabulary (`metrics.prometheus.Snapshot`), and the twin imports nothing
above layer 0 (docs/architecture.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from simulator.records.prometheus import MetricsRow, Snapshot, window_rows
from simulator.twin.core.engine import TwinEngine


def engine_snapshot(engine: TwinEngine) -> Snapshot:
    """The engine's counters and gauges under the scraper's canonical names."""
    c = engine.counters
    return Snapshot("twin", counters={"prefix_cache_queries": float(c.prefix_cache_queries),
                                      "prefix_cache_hits": float(c.prefix_cache_hits),
                                      "prompt_tokens": float(c.prompt_tokens),
                                      "generation_tokens": float(c.generation_tokens),
                                      "preemptions": float(c.preemptions)},
                    gauges={"kv_usage": engine.kv_usage(),
                            "requests_running": float(engine.num_running()),
                            "requests_waiting": float(engine.num_waiting())},
                    info={"kv_capacity_tokens": float(engine.num_blocks * engine.block_size)})


@dataclass
class EngineTimeline:
    """Snapshots at most every `interval_s` (simulated seconds) from `origin`."""

    interval_s: float = 5.0
    origin: float | None = None
    offset_s: float = 0.0    # a resumed run's timeline continues where the journal ended
    samples: list[tuple[float, Snapshot]] = field(default_factory=list)

    def start(self, now: float, engine: TwinEngine) -> None:
        self.origin = now
        self.samples = [(0.0, engine_snapshot(engine))]

    def next_due(self) -> float:
        """Engine time of the next sample (inf before `start`): the driver stops each
        advance there, so a lone request in flight is sampled mid-way (with one session
        nothing else would stop the engine before the request had finished and freed its
        KV, and every gauge would read 0)."""
        if self.origin is None:
            return math.inf
        return self.origin + self.samples[-1][0] + self.interval_s

    def observe(self, now: float, engine: TwinEngine) -> None:
        """Called by the driver after each advance; samples when a window has passed."""
        if self.origin is None:
            return
        t = now - self.origin
        if t - self.samples[-1][0] >= self.interval_s:
            self.samples.append((t, engine_snapshot(engine)))

    def close(self, now: float, engine: TwinEngine) -> None:
        """The last, possibly shorter, window up to `now`."""
        if self.origin is not None and now - self.origin > self.samples[-1][0]:
            self.samples.append((now - self.origin, engine_snapshot(engine)))

    def rows(self) -> list[MetricsRow]:
        """`server_metrics` rows: per window, counter deltas and gauges at its end."""
        return self.rows_since(0)[0]

    def rows_since(self, done: int) -> tuple[list[MetricsRow], int]:
        """The rows of the windows after the first `done` ones, and how many windows
        are done now (a live view reads the log as it grows; reading changes nothing)."""
        out: list[MetricsRow] = []
        samples = self.samples
        for i in range(done, len(samples) - 1):
            (t0, prev), (t1, cur) = samples[i], samples[i + 1]
            out += window_rows(prev, cur, t0 + self.offset_s, t1 + self.offset_s)
        return out, max(done, len(samples) - 1)
