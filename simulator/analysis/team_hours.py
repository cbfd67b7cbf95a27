"""A team's day sized interval by interval (pure): the fewest cards each interval (an
hour by default) needs to meet the SLOs for its own traffic, and what a fleet that
follows them costs against one held at the peak all day.

Each interval is judged on its own window: its replay carries the sessions already in
flight warm into it — the requests of the `lead_s` before it, and the last request of
every session it continues that has none there, sent at the lead-in's start — and only
the requests whose recorded start falls inside the interval are judged
(`Interval.lead`: per replayed stream, how many of its first requests are lead-in).

The answer is a LOWER BOUND on what an autoscaled fleet needs: a perfect autoscaler
that knows each interval's traffic in advance and brings cards up with no warm-up, no
cold cache and no scaling delay (`LOWER_BOUND`). Empty intervals need 0 cards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from simulator.analysis.metric_keys import SummaryRecord
from simulator.analysis.slo import Slo, failures
from simulator.util.numbers import to_int

LOWER_BOUND = ("a lower bound: a perfect autoscaler that knows each interval's traffic "
               "and starts cards with no warm-up, no cold cache and no scaling delay")
LEAD_S = 300.0          # lead-in before each interval: 5 min of the day's traffic (the
#                         profile's step) warms the cache and fills the queues; a longer
#                         lead costs its share of replay and changes the answer little
DAY_H = 24.0            # a fixed fleet is held all day


@dataclass(frozen=True, slots=True)
class Interval:
    """One interval of the day: [start_s, end_s) since the day's midnight (UTC)."""

    index: int
    start_s: float
    end_s: float
    requests: int                     # judged: recorded starts inside the interval
    lead_requests: int = 0            # replayed before it, not judged
    in_flight: int = 0                # peak sessions in flight (telemetry)
    lead: tuple[int, ...] = ()        # per replayed stream: its lead-in requests


@dataclass(frozen=True, slots=True)
class HourProbe:
    cards: int
    passed: bool
    failed: tuple[str, ...]
    figures: SummaryRecord            # the judged requests' figures ({} when early)
    run_dir: str
    # decided early (`analysis.early_verdict`): why it FAILS whatever the rest of its
    # run would give; the run was stopped there, so it has no figures of its own
    early: str | None = None


@dataclass
class HourAnswer:
    interval: Interval
    cards: int | None = None          # None: not within max_replicas (or not judged)
    probes: list[HourProbe] = field(default_factory=list)
    done: bool = False
    plateau: bool = False             # cards None: more cards stopped helping (not the cap)

    @property
    def binding(self) -> tuple[str, ...]:
        """The SLOs that fail one card below the answer (what binds this interval)."""
        if self.cards is None:
            return ()
        below = next((p for p in self.probes if p.cards == self.cards - 1), None)
        return below.failed if below is not None else ()


def interval_failures(figures: SummaryRecord, slos: Sequence[Slo]) -> tuple[str, ...]:
    return failures(figures, slos)


CARD_CAP_MIN = 64


def card_cap(in_flight_peak: int) -> int:
    """The most cards a team day's search tries: 64, or the day's peak sessions in
    flight when more — behind session affinity a session runs on one card, so more
    cards than sessions in flight cannot help (a day of 100,000 requests has ~500)."""
    return max(CARD_CAP_MIN, in_flight_peak)


def first_guess(peak_cards: int, peak_load: int, load: int) -> int:
    """An interval's first probe from the peak interval's answer, in proportion to its
    load (the search walks down or gallops up from it)."""
    if peak_load <= 0 or load <= 0:
        return 1
    return max(1, math.ceil(peak_cards * load / peak_load))


def peak_overlap(spans: Iterable[tuple[float, float]]) -> int:
    """The most of these [start, end) spans open at once."""
    edges = sorted(e for a, b in spans for e in ((a, 1), (b, -1)))
    now = top = 0
    for _t, d in edges:          # an end before a start at the same instant
        now += d
        top = max(top, now)
    return top


def batch_at_speed(speed: Callable[[int], float], floor: float, most: int) -> int:
    """The largest batch (1 … `most`) whose per-request decode speed `speed(b)` still
    meets `floor`; 1 when not even one request alone does."""
    best = 1
    for b in range(1, max(1, most) + 1):
        if speed(b) < floor:
            break
        best = b
    return best


def capacity_start(in_flight: int, per_card: int) -> int:
    """The peak interval's first probe, from a capacity estimate: the requests the
    telemetry had in flight at once over what one card decodes at the SLO's speed
    floor, one card under it — below the answer a probe is stopped early once it fails
    (`analysis.early_verdict`), above it each probe is a whole replay, so the search
    starts low and gallops up rather than walking down from too many."""
    return max(1, math.ceil(in_flight / max(1, per_card)) - 1)


@dataclass
class TeamHours:
    """Cards per interval over the day and what a fixed fleet costs against one that
    follows them."""

    interval_s: float
    lead_s: float
    max_replicas: int
    hours: list[HourAnswer]
    price_per_hour: float | None = None
    interrupted: bool = False

    @property
    def judged(self) -> list[HourAnswer]:
        return [h for h in self.hours if h.done]

    @property
    def complete(self) -> bool:
        return not self.interrupted and all(h.done for h in self.hours)

    @property
    def peak(self) -> int | None:
        got = [h.cards for h in self.judged]
        return None if not got or None in got else max(c for c in got if c is not None)

    def card_hours(self) -> tuple[float | None, float | None]:
        """(a fleet fixed at the peak all day, a fleet following the intervals)."""
        peak = self.peak
        if peak is None or not self.complete:
            return None, None
        h = self.interval_s / 3600.0
        return peak * DAY_H, sum((x.cards or 0) * h for x in self.hours)

    def mean(self) -> float | None:
        """Mean cards over the replayed intervals (an empty one needs none)."""
        _fixed, follow = self.card_hours()
        span_h = len(self.hours) * self.interval_s / 3600.0
        return None if follow is None or not span_h else follow / span_h

    def usd(self) -> tuple[float | None, float | None]:
        fixed, follow = self.card_hours()
        p = self.price_per_hour
        if p is None or fixed is None or follow is None:
            return None, None
        return fixed * p, follow * p

    def binding_hours(self) -> list[HourAnswer]:
        """The intervals that need the peak's cards: where the SLO binds the fleet."""
        peak = self.peak
        return [h for h in self.judged if peak and h.cards == peak]

    def to_dict(self) -> dict[str, object]:
        fixed, follow = self.card_hours()
        usd_fixed, usd_follow = self.usd()
        return {
            "interval_s": self.interval_s, "lead_in_s": self.lead_s,
            "lower_bound": LOWER_BOUND, "interrupted": self.interrupted,
            "status": ("INTERRUPTED: the intervals judged so far, not the answer"
                       if self.interrupted else "complete" if self.complete else "partial"),
            "peak_cards": self.peak, "mean_cards": self.mean(),
            "card_hours_fixed_at_peak": fixed, "card_hours_following": follow,
            "price_per_hour": self.price_per_hour,
            "usd_per_day_fixed_at_peak": usd_fixed, "usd_per_day_following": usd_follow,
            "binding": [clock(h.interval.start_s) for h in self.binding_hours()],
            "intervals": [{
                "start": clock(h.interval.start_s), "end": clock(h.interval.end_s),
                "start_s": h.interval.start_s, "end_s": h.interval.end_s,
                "requests": h.interval.requests, "lead_requests": h.interval.lead_requests,
                "in_flight_peak": h.interval.in_flight, "judged": h.done, "cards": h.cards,
                "not_within_cap": h.done and h.cards is None and bool(h.interval.requests)
                and not h.plateau, "plateau": h.plateau,
                "binding": list(h.binding),
                "probes": [{"cards": p.cards, "passed": p.passed, "failed": list(p.failed),
                            "run_dir": p.run_dir, "figures": dict(p.figures),
                            "early_verdict": p.early}
                           for p in h.probes]} for h in self.hours]}


def clock(s: float) -> str:
    d, rem = divmod(int(s), 86_400)
    return f"{'+' + str(d) + 'd ' if d else ''}{rem // 3600:02d}:{rem % 3600 // 60:02d}"


def _unanswered(h: TeamHours) -> str:
    """Why an interval has no answer: over the card cap ('>N'), or a plateau ('flat')."""
    over = [clock(x.interval.start_s) for x in h.hours
            if x.done and x.cards is None and x.interval.requests and not x.plateau]
    flat = [clock(x.interval.start_s) for x in h.hours if x.plateau]
    return "; ".join(
        ([f"{', '.join(over)} not within {h.max_replicas} card(s), the cap"] if over else [])
        + ([f"{', '.join(flat)}: more cards stop helping (the SLO is bound by each "
            "request's own time)"] if flat else []))


def _money(v: float | None) -> str:
    return "n/a (no --price-per-hour)" if v is None else f"${v:,.2f}"


def format_hours(h: TeamHours, slos: Sequence[Slo]) -> str:
    """The table (cards and sessions in flight per interval, each as a bar), then
    peak, mean, card-hours and $/day, the binding intervals, and the lower-bound label."""
    step = h.interval_s
    head = (f"cards per {step / 60:g} min, each interval judged on its own requests "
            f"(lead-in {h.lead_s / 60:g} min carried warm) — {LOWER_BOUND}")
    if h.interrupted:
        head = ("INTERRUPTED — the intervals judged so far, NOT the answer; " + head)
    top_c = max([x.cards or 0 for x in h.hours] + [1])
    top_f = max([x.interval.in_flight for x in h.hours] + [1])
    lines = [head, f"  {'interval':<13} {'requests':>8}  {'in flight':<22} "
                   f"{'cards':<22} binds"]
    for x in h.hours:
        iv = x.interval
        cards = ("…" if not x.done else "flat" if x.plateau
                 else f">{h.max_replicas}" if x.cards is None and iv.requests
                 else str(x.cards))
        cbar = "█" * round((x.cards or 0) / top_c * 16)
        fbar = "█" * round(iv.in_flight / top_f * 16)
        lines.append(f"  {clock(iv.start_s)}–{clock(iv.end_s)} {iv.requests:8,d}  "
                     f"{iv.in_flight:4d} {fbar:<17} {cards:>4} {cbar:<17} "
                     f"{', '.join(x.binding)}")
    if not h.complete:
        done = len(h.judged)
        lines.append(f"{done} of {len(h.hours)} interval(s) judged"
                     + ("; interrupted" if h.interrupted else ""))
        return "\n".join(lines)
    fixed, follow = h.card_hours()
    usd_fixed, usd_follow = h.usd()
    mean = h.mean()
    lines += [
        f"peak {h.peak} card(s), mean {mean:.2f} over the {len(h.hours)} interval(s)" if mean is not None
        else f"peak {h.peak} card(s)" if h.peak is not None else
        f"peak: NOT FOUND — {_unanswered(h)}",
        f"card-hours per day: fixed at the peak all day {fixed:,.1f}, following the intervals "
        f"{follow:,.1f}" if fixed is not None and follow is not None else
        f"card-hours per day: n/a ({_unanswered(h)})",
        f"$/day: fixed {_money(usd_fixed)}, following {_money(usd_follow)}",
        "the SLO binds the fleet in: " + (", ".join(
            f"{clock(x.interval.start_s)} ({', '.join(x.binding) or 'at 1 card'})"
            for x in h.binding_hours()) or "none"),
        f"judged on {' and '.join(map(str, slos))}; LOWER BOUND ({LOWER_BOUND})"]
    return "\n".join(lines)


def plot_series(h: Mapping[str, object]) -> tuple[list[str], list[int | None], list[int]]:
    """(labels, cards, sessions in flight) per interval, from size.json's `hours`."""
    got = h.get("intervals")
    rows = [r for r in got if isinstance(r, Mapping)] if isinstance(got, list) else []
    return ([str(r["start"]) for r in rows], [_cards(r.get("cards")) for r in rows],
            [to_int(r.get("in_flight_peak") or 0) for r in rows])


def _cards(v: object) -> int | None:
    """An interval's cards as size.json holds them (None: not within the cap)."""
    return v if isinstance(v, int) else None
