"""Seeded fault injection for the HTTP twin: what real endpoints and proxies do to clients.

A spec such as ``"429:0.03,529:0.03,500:0.02,disconnect:0.02,stall:0.01:30,spike:0.05:2"``
gives, per kind, the probability that a request gets that fault (kinds are mutually
exclusive; the probabilities must sum to at most 1). `stall` and `spike` take an optional
third field, their duration in seconds. Draws come from one seeded RNG in arrival order,
so a retried request draws afresh (a fault is not sticky) and a run is reproducible.

Kinds and how they look on the wire:
  429         HTTP 429 rate_limit_error with a `retry-after` header (seconds)
  529         HTTP 529 overloaded_error
  500         HTTP 500 api_error
  disconnect  HTTP 200, some tokens, then the connection is closed mid-stream
  error_event HTTP 200, some tokens, then an SSE `error` event (overloaded_error)
  malformed   HTTP 200, some tokens, then an SSE event whose data is not JSON
  stall       HTTP 200, some tokens, then nothing for `stall` seconds, then the rest
  spike       the request waits `spike` seconds before it reaches the engine
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from simulator.errors import InputError

DEFAULT_STALL_S = 300.0    # longer than any sane client read timeout
DEFAULT_SPIKE_S = 5.0
DEFAULT_RETRY_AFTER_S = 1


class FaultKind(enum.StrEnum):
    RATE_LIMIT = "429"
    OVERLOADED = "529"
    SERVER = "500"
    DISCONNECT = "disconnect"
    ERROR_EVENT = "error_event"
    MALFORMED = "malformed"
    STALL = "stall"
    SPIKE = "spike"

    @property
    def before_stream(self) -> bool:
        """True for faults answered with an HTTP error status instead of a stream."""
        return self in (FaultKind.RATE_LIMIT, FaultKind.OVERLOADED, FaultKind.SERVER)

    @property
    def mid_stream(self) -> bool:
        """True for faults that strike after some tokens were streamed."""
        return self in (FaultKind.DISCONNECT, FaultKind.ERROR_EVENT, FaultKind.MALFORMED,
                        FaultKind.STALL)


# HTTP status, Anthropic error type, message for the error-status kinds.
ERROR_REPLIES: dict[FaultKind, tuple[int, str, str]] = {
    FaultKind.RATE_LIMIT: (429, "rate_limit_error",
                           "Number of request tokens has exceeded your rate limit."),
    FaultKind.OVERLOADED: (529, "overloaded_error", "Overloaded"),
    FaultKind.SERVER: (500, "api_error", "Internal server error"),
}


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Per-kind probabilities and durations (seconds)."""

    probabilities: tuple[tuple[FaultKind, float], ...] = ()
    stall_s: float = DEFAULT_STALL_S
    spike_s: float = DEFAULT_SPIKE_S
    retry_after_s: int = DEFAULT_RETRY_AFTER_S

    @property
    def enabled(self) -> bool:
        return any(p > 0 for _, p in self.probabilities)


@dataclass(frozen=True, slots=True)
class FaultDecision:
    """What happens to one request. `after_tokens`: mid-stream faults strike once this
    many output tokens were sent (at least 1, so the stream has started)."""

    kind: FaultKind | None
    after_tokens: int = 1
    duration_s: float = 0.0


NO_FAULT = FaultDecision(None)


def _parse_item(item: str) -> tuple[FaultKind, float, float | None]:
    parts = item.strip().split(":")
    known = ", ".join(k.value for k in FaultKind)
    try:
        kind = FaultKind(parts[0].strip().lower())
    except ValueError:
        raise InputError(f"--faults {item!r}: unknown fault kind (known: {known})") from None
    if len(parts) not in (2, 3) or (len(parts) == 3 and kind not in
                                    (FaultKind.STALL, FaultKind.SPIKE)):
        raise InputError(f"--faults {item!r}: expected KIND:PROBABILITY"
                         " (stall and spike also take :SECONDS)")
    try:
        prob = float(parts[1])
        seconds = float(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise InputError(f"--faults {item!r}: not a number") from None
    if not 0.0 <= prob <= 1.0:
        raise InputError(f"--faults {item!r}: probability must be within [0, 1]")
    if seconds is not None and not 0 <= seconds <= 86_400:
        raise InputError(f"--faults {item!r}: seconds must be within [0, 86400]")
    return kind, prob, seconds


def parse_faults(spec: str | None) -> FaultSpec:
    """Parse a `--faults` value (empty or None → no faults); raises InputError."""
    if not spec or not spec.strip():
        return FaultSpec()
    probs: dict[FaultKind, float] = {}
    stall_s, spike_s = DEFAULT_STALL_S, DEFAULT_SPIKE_S
    for item in spec.split(","):
        if not item.strip():
            continue
        kind, prob, seconds = _parse_item(item)
        if kind in probs:
            raise InputError(f"--faults: {kind.value} given twice")
        probs[kind] = prob
        if seconds is not None and kind is FaultKind.STALL:
            stall_s = seconds
        elif seconds is not None:
            spike_s = seconds
    total = sum(probs.values())
    if total > 1.0 + 1e-9:
        raise InputError(f"--faults: probabilities sum to {total:g} > 1")
    return FaultSpec(tuple(probs.items()), stall_s=stall_s, spike_s=spike_s)


class FaultInjector:
    """Draws one `FaultDecision` per request from a seeded RNG (arrival order)."""

    def __init__(self, spec: FaultSpec, seed: int = 0) -> None:
        self.spec = spec
        self._rng = random.Random(f"faults:{seed}")
        self.injected: dict[FaultKind, int] = dict.fromkeys(FaultKind, 0)

    def draw(self, max_tokens: int) -> FaultDecision:
        """Decide the fault for a request that may stream up to `max_tokens` tokens."""
        if not self.spec.enabled:
            return NO_FAULT
        u = self._rng.random()
        acc = 0.0
        for kind, prob in self.spec.probabilities:
            acc += prob
            if u < acc:
                return self._decision(kind, max_tokens)
        return NO_FAULT

    def _decision(self, kind: FaultKind, max_tokens: int) -> FaultDecision:
        self.injected[kind] += 1
        if kind is FaultKind.SPIKE:
            return FaultDecision(kind, duration_s=self.spec.spike_s)
        after = self._rng.randint(1, max(1, min(max_tokens, 64)))
        duration = self.spec.stall_s if kind is FaultKind.STALL else 0.0
        return FaultDecision(kind, after_tokens=after, duration_s=duration)
