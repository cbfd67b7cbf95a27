"""Per-token arrival times of one attempt, shared by every dialect's reply state."""

from __future__ import annotations

from array import array

from simulator.endpoints.base import EndpointError, ErrorType, Timing
from simulator.endpoints.wire.sse import StreamFault
from simulator.protocol.messages import Block


class DeltaTimes:
    """Per-token timestamps of one attempt, shared by every dialect's reply state:
    `mark` one arrival time per delta; `timing` and `failure` report them."""

    __slots__ = ("first", "first_chunk", "last", "n_deltas", "sent", "times")

    def __init__(self, sent: float) -> None:
        self.sent = sent
        self.first: float | None = None
        self.first_chunk: float | None = None
        self.last: float | None = None
        self.n_deltas = 0
        self.times = array("d")

    def chunk(self, now: float) -> None:
        """A chunk of the reply arrived at `now`, with or without text."""
        if self.first_chunk is None:
            self.first_chunk = now

    def mark(self, now: float, k: int = 1) -> None:
        """Record `k` content deltas arriving at `now` (seconds)."""
        if self.first is None:
            self.first = now
            if self.first_chunk is None:     # no chunk without text came before it
                self.first_chunk = now
        self.last = now
        self.n_deltas += k
        if k == 1:
            self.times.append(now)
        else:
            self.times.extend([now] * k)

    def content(self) -> tuple[tuple[Block, ...], int]:
        """(content blocks, token estimate): the subclass's reply."""
        return (), self.n_deltas

    def partial_output_tokens(self) -> int:
        """Best estimate of tokens received so far (for a failed attempt)."""
        try:
            return self.content()[1]
        except StreamFault:
            return self.n_deltas

    def timing(self, done: float | None) -> Timing:
        return Timing(self.sent, self.first, self.last, done, self.n_deltas, self.first_chunk)

    def failure(self, kind: ErrorType, message: str, status: int | None,
                now: float) -> EndpointError:
        """The attempt's `EndpointError`, with the timings and tokens received so far."""
        return EndpointError(kind, message, status=status, timing=self.timing(now),
                             partial_output_tokens=self.partial_output_tokens())
