"""How many cards a team needs under prefill/decode disaggregation, and which P:D split,
beside the aggregated answer on the same cards: the answer of `size --team M --pd`.

The search (`sweep.pd_size.PDProfile`) first finds the fewest aggregated replicas under
session affinity that hold the team within the SLOs (`FleetSearch`), then the fewest
cards N split into P prefill and D decode instances that do: it starts at the
aggregated answer, tries a few splits per N (`splits`) and walks N down while one
passes, else gallops up. At the P/D answer's N it compares with the aggregated fleet of
N replicas: goodput per card and $ per hour (N cards either way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from simulator.analysis.fleet_sizing import FleetProbe
from simulator.analysis.metric_keys import fact, figure
from simulator.analysis.run_summary import Summary, record_of
from simulator.analysis.sizing import sweep_row
from simulator.util.numbers import is_number

SPLIT_SHARES = (0.25, 1 / 3, 0.5)        # prefill share of the cards tried per N


def splits(cards: int) -> list[tuple[int, int]]:
    """The (P, D) splits tried on `cards` cards: P ≈ ¼, ⅓, ½ of them, each side ≥ 1."""
    if cards < 2:
        return []
    out: list[tuple[int, int]] = []
    for share in SPLIT_SHARES:
        p = min(max(1, round(cards * share)), cards - 1)
        if (p, cards - p) not in out:
            out.append((p, cards - p))
    return out


@dataclass
class PDProbe:
    prefill: int
    decode: int
    passed: bool
    failed: tuple[str, ...]
    summary: Summary

    @property
    def cards(self) -> int:
        return self.prefill + self.decode


def _pd_block(summary: Summary) -> Mapping[str, object]:
    """The engine's P/D block (empty without one)."""
    pd = (fact(record_of(summary), "engine") or {}).get("pd") or {}
    return pd if isinstance(pd, Mapping) else {}


def card_figures(summary: Summary, cards: int) -> dict[str, float | None]:
    """A team run's figures per card: goodput per card (window, else whole run), $ per hour."""
    s = record_of(summary)
    good = figure(s, "window_goodput_tok_s")
    if good is None:
        good = figure(s, "goodput_tok_s")
    price = fact(s, "price_per_hour")
    pd = _pd_block(summary)
    return {"cards": cards,
            "goodput_per_card_tok_s": good / cards if isinstance(good, int | float) else None,
            "usd_per_hour": price,
            "per_session_tok_s": s.get("window_per_session_tok_s",
                                       figure(s, "per_session_tok_s")),
            "ttft_p95_s": s.get("window_ttft_p95_s", figure(s, "ttft_p95_s")),
            "itl_p95_s": figure(s, "window_itl_p95_s"),
            "remote_prefill_share": _share(pd.get("remote_prefill_share")),
            "prefill_utilization": _share(pd.get("prefill_utilization")),
            "decode_utilization": _share(pd.get("decode_utilization"))}


def _share(v: object) -> float | None:
    """A P/D block's share as written (None when absent or not a number)."""
    return v if is_number(v) else None


@dataclass
class PDSizing:
    team_sessions: int
    aggregated: int | None                    # fewest aggregated replicas (affinity)
    split: tuple[int, int] | None             # the P/D answer: fewest cards, best split
    max_cards: int
    agg_probes: list[FleetProbe] = field(default_factory=list)
    probes: list[PDProbe] = field(default_factory=list)

    def best_at(self, cards: int) -> PDProbe | None:
        """The passing split on `cards` cards with the most goodput (None: none passed)."""
        ok = [p for p in self.probes if p.cards == cards and p.passed]
        return max(ok, key=lambda p: card_figures(p.summary, cards)["goodput_per_card_tok_s"]
                   or 0.0, default=None)

    def beside(self) -> dict[str, object] | None:
        """At the P/D answer's card count: the P/D run's and the aggregated fleet's
        figures per card (None when either was not run)."""
        if self.split is None:
            return None
        n = sum(self.split)
        pd_probe = next((p for p in self.probes if (p.prefill, p.decode) == self.split), None)
        agg = next((p for p in self.agg_probes if p.replicas == n), None)
        if pd_probe is None or agg is None:
            return None
        return {"cards": n,
                "pd": {"prefill": self.split[0], "decode": self.split[1],
                       "passed": True, **card_figures(pd_probe.summary, n)},
                "aggregated": {"replicas": n, "passed": agg.passed,
                               **card_figures(agg.summary, n)}}

    def to_dict(self) -> dict[str, object]:
        return {"team_sessions": self.team_sessions, "aggregated_replicas": self.aggregated,
                "pd_split": list(self.split) if self.split else None,
                "pd_cards": sum(self.split) if self.split else None,
                "max_cards": self.max_cards, "same_cards": self.beside(),
                "aggregated_probes": [sweep_row({"replicas": p.replicas, "passed": p.passed,
                                                 "failed": list(p.failed)}, p.summary)
                                      for p in self.agg_probes],
                "pd_probes": [sweep_row({"prefill": p.prefill, "decode": p.decode,
                                         "passed": p.passed, "failed": list(p.failed),
                                         "pd": (fact(record_of(p.summary), "engine") or {})
                                         .get("pd")},
                                        p.summary) for p in self.probes]}
