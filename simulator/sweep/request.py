"""One `size` search as one value: what the command's options say, typed, whose
constructor refuses in one line every combination the command refuses.

`endurance size` builds a `SizeRequest` from its options and hands it to
`sweep.api.search`; `lab.size`, a notebook or a script build the same request in
Python, so a library caller meets the command's refusals word for word (they lived in
the CLI, and a notebook calling the searches met none of them). Which search a request
is follows one precedence (`kind`): a node's TP layouts > an imported team's day (read
from the scenario, so decided by `api.prepare`) > a stepped ramp > output-speed tiers >
host KV tiers > a team's P:D split > a fleet behind a router > one card (its answer
divided into `team` cards when given).

Pure: no file is read here. What only the scenario can refuse (a team replay given a
ramp, `--interval` off one) is refused by `api.prepare`, before any run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.analysis.policy_sweep import split_listed_set
from simulator.analysis.ramp import parse_steps, ramp_hold_s
from simulator.analysis.slo import Slo, parse_slo
from simulator.analysis.tier_sizing import MAX_HOST_GIB
from simulator.errors import InputError
from simulator.run.bounds import MAX_TWIN_SESSIONS
from simulator.util.durations import parse_duration_s

SearchKind = Literal["node", "ramp", "speed_tiers", "kv_tiers", "pd", "fleet", "card"]
EXECUTORS = ("local", "ray")
HOLD, MAX_STEP = "3m", "30m"        # a ramp step's window, and the longest it may take

# the bounds the command's options carry (click ranges), so a caller of the library is
# held to them too: (field, option, low, high)
_BOUNDS: tuple[tuple[str, str, int, int], ...] = (
    ("max_sessions", "--max-sessions", 1, 100_000), ("repeats", "--repeats", 0, 100),
    ("parallel", "--parallel", 1, 1024))


@dataclass(frozen=True)
class SizeRequest:
    """Everything one `size` search needs, refused in one line when it means nothing.

    The fields are the command's options under their own names (`overrides` are every
    `--set`, the sugar flags' included; durations are text as typed: "90s", "3m").
    `given` names the command's sugar flags behind some `overrides` (`--pd`,
    `--replicas`), so a refusal names what was typed; from Python it stays empty and
    those overrides are named as `--set`."""

    scenario: str | Path
    slos: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    # where the points run
    endpoint: str | None = None
    twin: str | None = None
    spec: str | None = None
    client: str | None = None
    price_per_hour: float | None = None
    reset_prefix_cache: bool = False
    parallel: int = 1
    executor: str = "local"
    ray_address: str | None = None
    # the search
    max_sessions: int = 64
    repeats: int = 1
    team: int | None = None
    router: str | None = None           # with `team`: the fleet search behind this policy
    pd: bool = False                    # with `team`: search the P:D split
    kv_offload_gibs: tuple[float, ...] | None = None   # one search per host KV tier size
    tiers: tuple[float, ...] = ()       # output-speed tiers (decode tok/s floors)
    ttft: float | None = None           # the tiers' TTFT bound, s (default 15)
    attainment: float = 0.9
    ramp: str | None = None             # stepped-ramp steps ("" the default plan)
    hold: str | None = None             # None: HOLD (given only with `ramp`)
    max_step: str | None = None         # None: MAX_STEP (given only with `ramp`)
    from_twin: str | None = None
    compare: bool = True
    node: str | None = None
    interval: str | None = None         # a team replay: the fewest cards per interval
    lead_in: str = "5m"
    # where its runs go: `folder`, else a new `size-<time>-<hex>` under `out`
    out: Path = Path("results")
    folder: Path | None = None
    reuse: bool = False                 # a matching completed run in `folder` is reused
    given: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every refusal the command makes before it reads the scenario, in its order."""
        self._bounds()
        check_some_slo(len(self.judged()), self.tiers)
        self._fan_out()
        self._ramp_flags()
        self._ramp_options()
        team_search = self.team is not None and (self.pd or self.router is not None)
        if self.node is not None and (self.ramp is not None or self.tiers or team_search
                                      or self.kv_offload_gibs is not None):
            raise InputError(NODE_ALONE)
        self.lead_s()
        if self.ramp is not None:
            self.hold_s()
            self.steps()

    # ------------------------------------------------------------- what it means --
    def judged(self) -> tuple[Slo, ...]:
        """The SLOs, parsed (a bad one is one line naming it)."""
        return tuple(parse_slo(s) for s in self.slos)

    def kind(self) -> SearchKind:
        """Which search this is (an imported team's day is told by the scenario)."""
        if self.node is not None:
            return "node"
        if self.ramp is not None:
            return "ramp"
        if self.tiers:
            return "speed_tiers"
        if self.kv_offload_gibs is not None:
            return "kv_tiers"
        if self.team is not None and self.pd:
            return "pd"
        if self.team is not None and self.router is not None:
            return "fleet"
        return "card"

    def lead_s(self) -> float:
        """A team day's interval lead-in, s."""
        return parse_duration_s(self.lead_in, "--lead-in")

    def hold_s(self) -> tuple[float, float]:
        """A ramp step's window and the longest a step may take to reach it, s."""
        return ramp_hold_s(self.hold or HOLD, self.max_step or MAX_STEP)

    def steps(self) -> tuple[int, ...] | None:
        """The ramp's planned steps (None: the default plan up to `max_sessions`)."""
        return parse_steps(self.ramp, self.max_sessions) if self.ramp else None

    # --------------------------------------------------------------- the refusals --
    def _bounds(self) -> None:
        """The ranges the command's options hold numbers to (click refuses them there)."""
        for name, option, low, high in _BOUNDS:
            value = getattr(self, name)
            if not low <= value <= high:
                raise InputError(f"{option} {value}: expected {low} … {high:,}")
        if self.team is not None and not 1 <= self.team <= 1_000_000:
            raise InputError(f"--team {self.team}: expected 1 … 1,000,000")
        for t in self.tiers:
            _finite("--tier", t, 0.0, 1e6)
        if self.ttft is not None:
            _finite("--ttft", self.ttft, 0.0, 86400.0, low_open=True)
        _finite("--attainment", self.attainment, 0.0, 1.0, low_open=True)
        if self.kv_offload_gibs is not None and not self.kv_offload_gibs:
            raise InputError("--kv-offload-gib: give at least one host tier size (GiB)")
        for g in self.kv_offload_gibs or ():
            _finite("--kv-offload-gib", g, 0.0, MAX_HOST_GIB)
        if self.executor not in EXECUTORS:
            raise InputError(f"--executor must be one of {', '.join(EXECUTORS)}, got "
                             f"{self.executor!r}")

    def _fan_out(self) -> None:
        check_fan_out(self.endpoint, self.reset_prefix_cache, self.parallel, self.executor)
        if self.ray_address and self.executor != "ray":
            raise InputError("--ray-address needs --executor ray")

    def _ramp_flags(self) -> None:
        """Options a ramp makes meaningless (or needs), refused, not dropped."""
        if self.ramp is None:
            for value, flag in ((self.hold, "--hold"), (self.max_step, "--max-step")):
                if value is not None:
                    raise InputError(f"{flag} is how long a --ramp holds its steps; give "
                                     f"--ramp (or drop {flag})")
            return
        if any(o.split("=", 1)[0].strip() in ("load.duration_s", "load.ramp")
               for o in self.overrides):
            raise InputError("--ramp with --duration (or --set load.duration_s/load.ramp): "
                             "the ramp ends when its steps are judged, each held --hold; "
                             "drop one")

    def _ramp_options(self) -> None:
        """What a ramp, speed tiers and `from_twin` cannot combine with; then what one
        search cannot be."""
        ramp, tiers, team = self.ramp, self.tiers, self.team
        if (ramp is not None or tiers) and self.kv_offload_gibs is not None:
            raise InputError("--ramp/--tier with a --kv-offload-gib list: one answer per "
                             "host tier size is a table of searches; run them once per "
                             "size (--kv-offload-gib G)")
        if tiers and team is not None:
            raise InputError("--tier with --team: size the tiers, then divide the team by "
                             "the tier's answer")
        if self.from_twin is not None and (ramp is None or self.endpoint is None):
            raise InputError("--from-twin starts a real ramp from the twin's answer: it "
                             "needs --ramp and --endpoint")
        if self.ttft is not None and not tiers:
            raise InputError("--ttft is the TTFT bound of --tier output-speed tiers; give a "
                             "--tier")
        if ramp is not None and team is not None:
            raise InputError("--ramp with --team: size one card with the ramp, then divide "
                             "(or run the probe search with --team)")
        if ramp is not None and self.repeats != 1:
            raise InputError("--ramp confirms its answer with a second hold; --repeats is "
                             "for the probe search")
        self._one_search()

    def _one_search(self) -> None:
        """What one size search cannot be: a sweep, or a team search that cannot run."""
        if split_listed_set(self.overrides) is not None:
            raise InputError("size: a --set list is a sweep (one search runs one "
                             "configuration); run `size` once per value, or `sweep --set "
                             "KEY=a,b`")
        if self.spec is not None and "," in self.spec:
            raise InputError("size: --spec a,b is a sweep (one search runs one setting); run "
                             "`size` once per setting, or `sweep --spec a,b`")
        fleet = self.team is not None and self.router is not None
        if self.pd and (self.team is None or self.endpoint is not None):
            raise InputError("size --pd searches a team's P:D split on the twin: give "
                             "--team M and no --endpoint")
        if fleet and self.endpoint is not None:
            raise InputError("size --team --router: the fleet search runs on the twin (no "
                             "--endpoint)")
        if self.team is not None:
            self._team_unit(self.team, fleet or self.pd)

    def _team_unit(self, team: int, runs_team: bool) -> None:
        """`team` divides by what one card holds (issue 57): a unit of several instances
        (a fixed P:D split, several replicas) would be counted as one card, and a search
        that runs the whole team (fleet, P:D) runs it in one in-process twin, which holds
        at most MAX_TWIN_SESSIONS sessions."""
        first: dict[str, str] = {}
        for o in self.overrides:
            k, _, v = o.partition("=")
            first.setdefault(k.strip(), v.strip())
        if "--pd" in self.given and not self.pd:
            p, d = first.get("fleet.prefill", "P"), first.get("fleet.replicas", "D")
            raise InputError(f"size --team with --pd {p}:{d}: that sizes one unit of {p} "
                             f"prefill + {d} decode instances, not one card; give --pd alone "
                             "to search the split and the cards (size --team M --pd)")
        one_card = {"fleet.prefill": "0", "fleet.replicas": "1"}
        unit = "--replicas" if "--replicas" in self.given else next(
            (f"--set {k}" for k, _, v in (o.partition("=") for o in self.overrides)
             if k.strip() in one_card and v.strip() != one_card[k.strip()]), None)
        if unit is not None:
            raise InputError(f"size --team with {unit}: --team counts the cards one card's "
                             "answer divides into; size one card (drop it), or search a "
                             "fleet (--router P) or a P:D split (--pd)")
        if runs_team and team > MAX_TWIN_SESSIONS:
            raise InputError(f"--team {team}: the fleet and P/D searches run the whole team "
                             f"in the in-process twin, which holds at most "
                             f"{MAX_TWIN_SESSIONS:,} sessions; size one card (drop "
                             "--router/--pd) to divide a larger team")


NODE_ALONE = ("size --node searches each TP layout's replica alone; --ramp, --tier, a team "
              "replay, --router/--pd and host KV tier lists do not combine with it")
TEAM_DAY_ALONE = ("size: a team replay sizes cards for the team's own arrivals; --ramp, "
                  "--tier, --team and host KV tiers do not apply")
NOT_A_TEAM_DAY = ("size --interval: sizes a team replay's day interval by interval (import "
                  "claude-code-otel / otel-genai first)")


def check_some_slo(slos: int, tiers: tuple[float, ...]) -> None:
    """A search judges against something: an SLO or an output-speed tier."""
    if not slos and not tiers:
        raise InputError("size: give an SLO (--slo 'per_session_tok_s>=50') or an "
                         "output-speed tier (--tier 30)")


def check_fan_out(endpoint: str | None, reset: bool, parallel: int, executor: str) -> None:
    """Options that cannot combine with running points at once (`sweep` and `size`)."""
    at_once = parallel > 1 or executor != "local"
    if reset and endpoint is None:
        raise InputError("--reset-prefix-cache needs --endpoint (the in-process twin "
                         "starts cold every point)")
    if reset and at_once:
        raise InputError("--reset-prefix-cache with --parallel/--executor: points running "
                         "at once share the server's cache; run them serially")
    if endpoint is not None and parallel > 1:
        raise InputError("--parallel with --endpoint: points running at once share the one "
                         "server, so no point measures its own session count; run them "
                         "serially (each point on the twin runs alone in virtual time)")


def _finite(option: str, value: float, low: float, high: float,
            low_open: bool = False) -> None:
    if not math.isfinite(value):
        raise InputError(f"{option} {value}: not a finite number")
    if value < low or (low_open and value == low) or value > high:
        raise InputError(f"{option} {value:g}: expected {'above' if low_open else 'at least'} "
                         f"{low:g} and at most {high:g}")
