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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

POWER, ENERGY, UTIL = "gpu_power_w", "gpu_energy_mj", "gpu_util"   # canonical names

ENERGY_KEYS: tuple[str, ...] = ("gpu_power_mean_w", "gpu_util_mean", "energy_wh",
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

    def add(self, metric: str, kind: str, value: float, span_s: float) -> None:
        """One /metrics window row of this target (`kind` "gauge" or "delta")."""
        if span_s <= 0:
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
        if self.energy_s > 0:
            return self.energy_j / self.energy_s
        return self.power_ws / self.power_s if self.power_s > 0 else None

    def mean_util(self) -> float | None:
        return self.util_ws / self.util_s if self.util_s > 0 else None


def fold(rows: Iterable[Mapping[str, Any]]) -> dict[str, PowerSums]:
    """Power sums per target (`source`) from /metrics window rows."""
    out: dict[str, PowerSums] = {}
    for r in rows:
        metric = r.get("metric")
        if metric not in (POWER, ENERGY, UTIL):
            continue
        span = float(r.get("t_end_s") or 0.0) - float(r.get("t_start_s") or 0.0)
        out.setdefault(str(r.get("source") or ""), PowerSums()).add(
            str(metric), str(r.get("kind")), float(r.get("value") or 0.0), span)
    return out


def energy_figures(sums: Mapping[str, PowerSums], wall_window_s: float | None,
                   output_tokens: int, sessions: float | None) -> dict[str, Any]:
    """The energy figures (None throughout without a measured power series) and
    `energy_source`: which targets they were measured from."""
    powers = {k: p for k, s in sums.items() if (p := s.mean_power_w()) is not None}
    out: dict[str, Any] = dict.fromkeys(ENERGY_KEYS)
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
