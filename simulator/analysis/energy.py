"""Energy figures from measured GPU power (a `--scrape` target such as NVIDIA's DCGM
exporter), pure.

Only measured power counts: a run with no power series has no energy figures (None),
and the in-process twin never has one. A target's mean power over the run is, best
first, its energy counter's increase over the scraped windows ÷ their length
(`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, an exact integral), or the time-weighted mean
of its power gauge samples (`DCGM_FI_DEV_POWER_USAGE`, each sample held over its
scrape window: the exporter's own sampling misses what happens between samples).
Several GPUs of one target are summed by the scrape (`records/prometheus.py`);
several targets (nodes) add up.

    energy_wh          = mean power (W) × the run's wall window (s) / 3600
    energy_wh_per_mtok = energy_wh / output tokens × 10⁶
    sessions_per_kw    = sessions (the achieved mean) / (mean power / 1000)

AA-AgentPerf leads with agents per MW; `sessions_per_kw` is the same figure per kW
for one card.

Telemetry may lie (issue 49). A target whose scrapes failed or were invalid (the run's
`telemetry` block, `telemetry_block`) measures nothing: its rows give no figure, and
neither does a target with a recorded negative or non-finite power or energy row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from simulator.analysis.metric_keys import MetricKey, SummaryRecord, as_record
from simulator.util.numbers import to_float, to_int

POWER, ENERGY, UTIL = "gpu_power_w", "gpu_energy_mj", "gpu_util"   # canonical names

ENERGY_KEYS: tuple[MetricKey, ...] = ("gpu_power_mean_w", "gpu_util_mean", "energy_wh",
                                "energy_wh_per_mtok", "sessions_per_kw")


@dataclass
class PowerSums:
    """One target's power series folded over its scrape windows."""

    energy_j: float = 0.0      # energy counter increase (J)
    energy_s: float = 0.0      # seconds those increases cover
    power_ws: float = 0.0      # Σ gauge × window length (W·s)
    power_s: float = 0.0
    util_ws: float = 0.0       # Σ utilisation share × window length
    util_s: float = 0.0
    invalid: bool = False      # a row that is no measurement: the target gives nothing

    def add(self, metric: str, kind: str, value: float, span_s: float) -> None:
        """One /metrics window row of this target (`kind` "gauge" or "delta")."""
        if not math.isfinite(value) or value < 0:
            self.invalid = True
        if span_s <= 0 or self.invalid:
            return
        if metric == ENERGY and kind == "delta":
            self.energy_j += value / 1000.0
            self.energy_s += span_s
        elif metric == POWER and kind == "gauge":
            self.power_ws += value * span_s
            self.power_s += span_s
        elif metric == UTIL and kind == "gauge":
            self.util_ws += value / 100.0 * span_s     # DCGM reports percent
            self.util_s += span_s

    def mean_power_w(self) -> float | None:
        if self.invalid:
            return None
        if self.energy_s > 0:
            return self.energy_j / self.energy_s
        return self.power_ws / self.power_s if self.power_s > 0 else None

    def mean_util(self) -> float | None:
        if self.invalid:
            return None
        return self.util_ws / self.util_s if self.util_s > 0 else None


def fold(rows: Iterable[Mapping[str, object]],
         unmeasured: Iterable[str] = ()) -> dict[str, PowerSums]:
    """Power sums per target (`source`) from /metrics window rows; the targets named in
    `unmeasured` (failed or invalid: `unmeasured_sources`) are left out."""
    out: dict[str, PowerSums] = {}
    skip = set(unmeasured)
    for r in rows:
        metric = r.get("metric")
        if metric not in (POWER, ENERGY, UTIL) or str(r.get("source") or "") in skip:
            continue
        span = to_float(r.get("t_end_s") or 0.0) - to_float(r.get("t_start_s") or 0.0)
        out.setdefault(str(r.get("source") or ""), PowerSums()).add(
            str(metric), str(r.get("kind")), _value(r.get("value")), span)
    return out


def _value(v: object) -> float:
    """A row's value; one that is not a number reads as NaN (no measurement)."""
    try:
        return to_float(v) if v is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


# ------------------------------------------------------------- telemetry health --
STATUS_RANK = {"ok": 0, "failed": 1, "invalid": 2}


def telemetry_block(events: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
    """The run's `telemetry` block: one entry per `--scrape` target from its scrapers'
    health events (`MetricsScraper.health`), the parts of a resumed run folded into
    one (the worst status and its reason, the counts added)."""
    out: dict[str, dict[str, object]] = {}
    for e in events:
        if e.get("event") != "telemetry":
            continue
        status = str(e.get("status"))
        entry: dict[str, object] = {
            "target": e.get("target"), "source": e.get("source"),
            "status": status if status in STATUS_RANK else "failed", "reason": e.get("reason"),
            **{k: to_int(e.get(k) or 0) for k in ("scrapes", "failed_scrapes", "windows")}}
        if e.get("duplicate_series"):
            entry["duplicate_series"] = to_int(e["duplicate_series"])
        key = str(e.get("source") or e.get("target"))
        prev = out.get(key)
        if prev is None:
            out[key] = entry
            continue
        worse = STATUS_RANK[str(entry["status"])] > STATUS_RANK[str(prev["status"])]
        for k in ("scrapes", "failed_scrapes", "windows", "duplicate_series"):
            if k in entry or k in prev:
                prev[k] = to_int(prev.get(k) or 0) + to_int(entry.get(k) or 0)
        if worse or (prev["reason"] is None and entry["status"] == prev["status"]):
            prev["status"], prev["reason"] = entry["status"], entry["reason"]
    return list(out.values())


def unmeasured_sources(telemetry: Sequence[Mapping[str, object]] | None) -> set[str]:
    """The `source` labels of targets whose telemetry is not a measurement."""
    return {str(t.get("source") or "") for t in telemetry or ()
            if t.get("status") != "ok"}


def energy_figures(sums: Mapping[str, PowerSums], wall_window_s: float | None,
                   output_tokens: int, sessions: float | None) -> SummaryRecord:
    """The energy figures (None throughout without a measured power series) and
    `energy_source`: which targets they were measured from."""
    powers = {k: p for k, s in sums.items() if (p := s.mean_power_w()) is not None}
    out = as_record(dict.fromkeys(ENERGY_KEYS))
    out["energy_source"] = None
    if not powers:
        return out
    power = sum(powers.values())
    utils = [u for s in sums.values() if (u := s.mean_util()) is not None]
    out["gpu_power_mean_w"] = power
    out["gpu_util_mean"] = sum(utils) / len(utils) if utils else None
    out["energy_source"] = "measured from " + ", ".join(sorted(k or "?" for k in powers))
    if wall_window_s:
        wh = power * wall_window_s / 3600.0
        out["energy_wh"] = wh
        out["energy_wh_per_mtok"] = wh / output_tokens * 1e6 if output_tokens > 0 else None
    if sessions and power > 0:
        out["sessions_per_kw"] = sessions / (power / 1000.0)
    return out
