"""Replay fidelity: each recorded request as replayed vs as recorded (pure).

Per request: the prompt size the server counted vs the recorded prompt (input +
cache read + cache creation), the output size vs the recorded output, the arrival
(simulated s since the run began) vs the recorded one (the session's start offset +
the call's `at_s`), and the cache-read share. Sizes are the replay's promise (the
import rebuilds each prompt to its recorded size, within the framing drift
`trace_build` documents); arrivals are the promise of `replay.timing: arrivals`,
kept while the server answers before the next recorded start — a request held
past its start because its previous reply came later (the server is slower than
the recorded one) is counted apart, with how long it was held: that is a finding
about the server, not an error of the replay. The cache-read
shares are two servers' caches (the provider's and the replay's), shown, not judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from simulator.records.manifest import Manifest
from simulator.scenario.replay import ReplaySpec
from simulator.util.formats import percent
from simulator.util.numbers import to_float, to_int

SIZE_TOLERANCE = 0.01           # the import's promise: sizes within 1%
ARRIVAL_TOLERANCE_S = 1.0       # arrivals within a second of simulated time


class FidelityFigures(TypedDict):
    """`Fidelity.figures()`: the replay's figures, as size.json and the report show them."""

    requests_recorded: int
    requests_replayed: int
    prompt_error_median: float | None
    prompt_error_max: float | None
    output_error_median: float | None
    output_error_max: float | None
    arrival_error_median_s: float | None
    arrival_error_max_s: float | None
    arrivals_late_over_1s: int
    arrivals_held: int
    held_median_s: float | None
    held_max_s: float | None
    cache_read_share_recorded: float | None
    cache_read_share_replayed: float | None
    within_tolerance: bool
    size_tolerance: float
    arrival_tolerance_s: float


@dataclass(frozen=True, slots=True)
class RequestFidelity:
    session: str
    call: int
    recorded_prompt: int
    prompt: int
    recorded_output: int
    output: int
    recorded_read: int
    read: int
    recorded_at_s: float | None
    at_s: float
    prev_reply_s: float | None = None    # when the previous call's reply arrived (replay)

    @property
    def prompt_error(self) -> float:
        return abs(self.prompt - self.recorded_prompt) / max(1, self.recorded_prompt)

    @property
    def output_error(self) -> float:
        """vs the recorded output; a recorded 0 is replayed as 1 (a request asks for ≥ 1)."""
        want = max(1, self.recorded_output)
        return abs(self.output - want) / want

    @property
    def arrival_error_s(self) -> float | None:
        return None if self.recorded_at_s is None else self.at_s - self.recorded_at_s

    @property
    def schedule_error_s(self) -> float | None:
        """Sent vs promised: the recorded start, or the previous reply if that came later."""
        if self.recorded_at_s is None:
            return None
        return self.at_s - max(self.recorded_at_s, self.prev_reply_s or 0.0)

    @property
    def held_s(self) -> float:
        """How long the previous reply held this request past its recorded start (the
        server answered slower than the recorded one): 0 when it came in time."""
        if self.recorded_at_s is None or self.prev_reply_s is None:
            return 0.0
        return max(0.0, self.prev_reply_s - self.recorded_at_s)


@dataclass
class Fidelity:
    requests: list[RequestFidelity] = field(default_factory=list)
    recorded: int = 0              # recorded requests in the replayed script
    replayed: int = 0              # of which a replay answered

    def _q(self, xs: list[float], q: float) -> float | None:
        if not xs:
            return None
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    def figures(self) -> FidelityFigures:
        p = [r.prompt_error for r in self.requests]
        o = [r.output_error for r in self.requests]
        a = [abs(e) for r in self.requests if (e := r.schedule_error_s) is not None]
        held = [r.held_s for r in self.requests if r.held_s > 0]
        rec_p = sum(r.recorded_prompt for r in self.requests)
        got_p = sum(r.prompt for r in self.requests)
        ok = (self.replayed == self.recorded and bool(p)
              and max(p) <= SIZE_TOLERANCE and max(o) <= SIZE_TOLERANCE
              and (not a or max(a) <= ARRIVAL_TOLERANCE_S))
        return {
            "requests_recorded": self.recorded, "requests_replayed": self.replayed,
            "prompt_error_median": self._q(p, 0.5), "prompt_error_max": max(p, default=None),
            "output_error_median": self._q(o, 0.5), "output_error_max": max(o, default=None),
            "arrival_error_median_s": self._q(a, 0.5), "arrival_error_max_s": max(a, default=None),
            "arrivals_late_over_1s": sum(x > ARRIVAL_TOLERANCE_S for x in a),
            "arrivals_held": len(held), "held_median_s": self._q(held, 0.5),
            "held_max_s": max(held, default=None),
            "cache_read_share_recorded": sum(r.recorded_read for r in self.requests) / rec_p
            if rec_p else None,
            "cache_read_share_replayed": sum(r.read for r in self.requests) / got_p
            if got_p else None,
            "within_tolerance": ok, "size_tolerance": SIZE_TOLERANCE,
            "arrival_tolerance_s": ARRIVAL_TOLERANCE_S}


def compare(spec: ReplaySpec, rows: Iterable[Mapping[str, object]]) -> Fidelity:
    """`rows`: a run's turn rows (turns.parquet as records). Session `s{i:04d}` replays
    recorded session i (copies beyond the script are left out); a request's arrival is
    its first attempt's send, its sizes the answered attempt's."""
    n = len(spec.sessions)
    first: dict[tuple[int, int], float] = {}
    ends: dict[tuple[int, int], float] = {}
    answered: dict[tuple[int, int], Mapping[str, object]] = {}
    for r in rows:
        if r.get("request_kind") != "turn":
            continue
        sid = str(r.get("session_id", ""))
        if not (sid.startswith("s") and sid[1:].isdigit()) or int(sid[1:]) >= n:
            continue
        key = (int(sid[1:]), to_int(r["turn_index"]))
        t = to_float(r["started_mono_s"])
        first[key] = min(first.get(key, t), t)
        if r.get("ok") and r.get("prompt_tokens") is not None:
            answered[key] = r
            ends[key] = t + to_float(r.get("e2e_s") or 0.0)
    out = Fidelity()
    for i, s in enumerate(spec.sessions):
        for k, call in enumerate(s.calls):
            if call.usage is None:
                continue
            out.recorded += 1
            got = answered.get((i, k))
            if got is None:
                continue
            out.replayed += 1
            u = call.usage
            out.requests.append(RequestFidelity(
                s.id, k, u.prompt_tokens, to_int(got["prompt_tokens"]), u.output_tokens,
                to_int(got.get("output_tokens") or 0), u.cache_read_tokens,
                to_int(got.get("cache_read_tokens") or 0),
                None if call.at_s is None or spec.timing != "arrivals"
                else s.start_offset_s + call.at_s, first[(i, k)], ends.get((i, k - 1))))
    return out


def format_fidelity(f: Mapping[str, object], worst: list[RequestFidelity] | None = None) -> str:
    """The fidelity table: what was replayed vs recorded, and whether it is within the
    tolerances."""
    arr = f["arrival_error_max_s"]
    lines = [
        f"replay fidelity, {f['requests_replayed']} of {f['requests_recorded']} recorded "
        f"requests replayed (replayed vs recorded):",
        f"  prompt size     error median {percent(f['prompt_error_median'], 2)}, "
        f"max {percent(f['prompt_error_max'], 2)}",
        f"  output size     error median {percent(f['output_error_median'], 2)}, "
        f"max {percent(f['output_error_max'], 2)}",
        "  arrival         " + ("n/a (no recorded arrivals)" if arr is None else
                                "sent vs its recorded start (or the previous reply, if "
                                f"later): off by median {f['arrival_error_median_s']:.3f} s, max "
                                f"{arr:.3f} s; {f['arrivals_late_over_1s']} more than 1 s off"),
        *([f"  held back       {f['arrivals_held']} request(s) sent when the previous reply "
           f"came, after their recorded start (this server answered slower than the "
           f"recorded one): by median {f['held_median_s']:.2f} s, max "
           f"{f['held_max_s']:.2f} s"] if f["arrivals_held"] else []),
        f"  cache-read share recorded {percent(f['cache_read_share_recorded'], 2)} (the provider's "
        f"cache), replayed {percent(f['cache_read_share_replayed'], 2)} (this server's)",
        f"  within {f['size_tolerance']:.0%} in size and {f['arrival_tolerance_s']:g} s in "
        f"arrival (requests not held back): {'yes' if f['within_tolerance'] else 'NO'}"]
    for r in worst or []:
        lines.append(f"    {r.session} call {r.call}: prompt {r.prompt:,} vs {r.recorded_prompt:,}, "
                     f"output {r.output:,} vs {r.recorded_output:,}"
                     + ("" if r.arrival_error_s is None else
                        f", arrival {r.at_s:.3f} s vs {r.recorded_at_s:.3f} s"))
    return "\n".join(lines)


def worst(f: Fidelity, n: int = 3) -> list[RequestFidelity]:
    """The `n` requests furthest off (size error, then arrival)."""
    return sorted(f.requests, key=lambda r: max(
        r.prompt_error / SIZE_TOLERANCE, r.output_error / SIZE_TOLERANCE,
        abs(r.schedule_error_s or 0.0) / ARRIVAL_TOLERANCE_S), reverse=True)[:n]


def team_spec(manifest: Manifest) -> ReplaySpec | None:
    """A run's team replay script (its manifest's resolved scenario), else None."""
    return None if manifest.scenario_resolved is None else manifest.scenario_resolved.team
