"""A probe's SLO verdict decided before its run ends (pure): once the judged requests
already answered break a percentile SLO by so much that no outcome of the rest can
bring it back, the probe FAILS whatever the rest give, and its run may stop there.

Only failures are decided early, and only on an SLO over a quantile of a per-request
figure (`QUANTILE_SLOS`: TTFT p50/p95, the decode and turn speed medians), computed by
the summary as `Series.quantile` / `Series.median` of the ok turn rows judged. With K
values known and at most R judged requests still to answer (each gives one value, or
none: an error, a request never sent), the final figure is at least what K plus R
copies of the lowest possible value give (for a `<=` SLO; the highest for `>=`): a
quantile with linear interpolation never falls when a value rises or one is added
above, and never rises when one is added below. So when even that bound misses the
SLO, the full run's verdict is FAIL too (`tests/analysis/test_early_verdict.py`
checks it against full runs' rows). The figures of a run stopped so are not the
run's: a probe decided early keeps its reason, never its partial figures as an answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from simulator.analysis.metric_keys import as_record
from simulator.analysis.slo import Slo
from simulator.util.numbers import to_int

# metric → (the row column it is a quantile of, q; None: the median)
QUANTILE_SLOS: dict[str, tuple[str, float | None]] = {
    "ttft_p50_s": ("ttft_s", 0.50), "ttft_p95_s": ("ttft_s", 0.95),
    "decode_tok_s_median": ("decode_tok_s", None), "turn_tok_s_median": ("turn_tok_s", None)}
_COLUMNS = tuple(dict.fromkeys(col for col, _q in QUANTILE_SLOS.values()))
# the remaining requests' most favourable values: beyond any duration or rate a run
# records, yet a median's mean of two of them stays finite (float max would overflow)
_LOWEST, _HIGHEST = -1e300, 1e300


def decidable(slos: Sequence[Slo]) -> tuple[Slo, ...]:
    """The SLOs a run's verdict can be decided on early."""
    return tuple(s for s in slos if s.metric in QUANTILE_SLOS)


def _figure(values: pd.Series, q: float | None) -> float:
    """The summary's own computation (`analysis.summary._quantile` / `_median`)."""
    return float(values.median() if q is None else values.quantile(q))


def bound(slo: Slo, known: Sequence[float], remaining: int) -> float | None:
    """The figure the SLO is judged on, at its most favourable over every outcome of
    `remaining` more judged requests (each one value or none); None with no value yet
    and none to come."""
    _col, q = QUANTILE_SLOS[slo.metric]
    fill = _LOWEST if slo.op in ("<=", "<") else _HIGHEST
    vals = [*known, *([fill] * remaining)]
    if not vals:
        return None
    if not known:          # only fills: nothing known of the figure yet
        return None
    return _figure(pd.Series(vals, dtype="float64"), q)


def decided_failure(slos: Sequence[Slo], known: Mapping[str, Sequence[float]],
                    remaining: int) -> str | None:
    """Why the run fails whatever its remaining requests give (None: not decided);
    `known` holds each column's values of the judged ok turn rows so far."""
    for slo in decidable(slos):
        col, _q = QUANTILE_SLOS[slo.metric]
        b = bound(slo, known.get(col, ()), remaining)
        if b is not None and not slo.check(as_record({slo.metric: b})):
            n = len(known.get(col, ()))
            return (f"{slo} fails whatever the {remaining:,} judged request(s) still to "
                    f"answer give: at best {b:.4g} from the {n:,} answered")
    return None


@dataclass(frozen=True, slots=True)
class EarlyRule:
    """What a probe's run needs to stop once its verdict is decided (plain values, so
    a point carries it to another process): the SLOs, how many judged requests it
    sends, and which rows are judged — a row of stream K (`session_id` sK, K modulo
    the streams) is judged from its turn `lead[K]` on (`analysis.team_hours.Interval`);
    no `lead`: every row is judged."""

    slos: tuple[Slo, ...]
    judged_requests: int
    lead: tuple[int, ...] = ()
    every: int = 0               # check after this many judged rows (0: ~1% of them)

    def verdict(self) -> EarlyVerdict:
        return EarlyVerdict(self)


@dataclass
class EarlyVerdict:
    """Fed each turn row as it is journaled; `decided` says why the verdict is FAIL
    already, or None. A judged request answered twice (two ok rows) switches it off:
    the bound assumes one value per request."""

    rule: EarlyRule
    decided: str | None = None
    known: dict[str, list[float]] = field(default_factory=dict)
    _answered: set[tuple[str, int]] = field(default_factory=set)
    _since: int = 0
    _off: bool = False

    def _judged(self, row: Mapping[str, object]) -> bool:
        lead = self.rule.lead
        if not lead:
            return True
        sid = str(row.get("session_id", ""))
        if not sid[1:].isdigit():
            return False
        return to_int(row.get("turn_index", 0)) >= lead[int(sid[1:]) % len(lead)]

    def feed(self, row: Mapping[str, object]) -> str | None:
        """Take one turn row; the reason once the verdict is decided."""
        if self.decided is not None or self._off or not decidable(self.rule.slos):
            return self.decided
        if row.get("request_kind") != "turn" or not row.get("ok") or not self._judged(row):
            return None
        key = (str(row.get("session_id")), to_int(row.get("turn_index", 0)))
        if key in self._answered:
            self._off = True
            return None
        self._answered.add(key)
        for col in _COLUMNS:
            v = row.get(col)
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
                self.known.setdefault(col, []).append(float(v))
        self._since += 1
        every = self.rule.every or max(16, self.rule.judged_requests // 100)
        if self._since >= every:
            self._since = 0
            self.decided = self.check()
        return self.decided

    def check(self) -> str | None:
        remaining = self.rule.judged_requests - len(self._answered)
        if remaining < 0 or self._off:
            return None
        return decided_failure(self.rule.slos, self.known, remaining)
