"""KV transfers from prefill to decode instances, priced from the link (pure).

A decode instance pulls a remote prefill's KV when it admits the request (vLLM's
NixlConnector: the scheduler allocates the blocks, the worker issues one NIXL READ of
the prompt's blocks past the local prefix-cache hit; the request waits off the batch
as WAITING_FOR_REMOTE_KVS). Transfers between one prefill and one decode instance
queue first-in first-out on their link, each taking `latency + bytes / bandwidth`. The
connector issues reads as requests are admitted and UCX serves them concurrently, so
on a real link they share the bandwidth; serving them one after another gives the
same completion time for the last of a burst and never a later one for the first (a
lower bound on the mean wait under sharing). Transfers of different pairs do not
contend: the twin models no shared NIC, switch or fabric congestion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from simulator.twin.pd.policy import LinkSpec


@dataclass(slots=True)
class LinkCounters:
    transfers: int = 0
    bytes: float = 0.0
    busy_s: float = 0.0      # Σ transfer durations
    wait_s: float = 0.0      # Σ (done − asked): queueing on the link + transfer


@dataclass(slots=True)
class LinkQueues:
    """The busy-until time of each (prefill, decode) pair's link, and their counters."""

    spec: LinkSpec
    bytes_per_token: float
    free_at: dict[tuple[int, int], float] = field(default_factory=dict)
    counters: LinkCounters = field(default_factory=LinkCounters)

    def transfer(self, pair: tuple[int, int], now: float, tokens: int) -> float:
        """Queue a pull of `tokens` tokens' KV on `pair`'s link at `now`; when it is done."""
        nbytes = tokens * self.bytes_per_token
        dur = self.spec.transfer_s(nbytes)
        done = max(self.free_at.get(pair, 0.0), now) + dur
        self.free_at[pair] = done
        c = self.counters
        c.transfers += 1
        c.bytes += nbytes
        c.busy_s += dur
        c.wait_s += done - now
        return done

    def puller(self, pair: tuple[int, int]) -> Callable[[float, int], float]:
        """`EngineRequest.kv_transfer` for a request prefilled on pair[0], decoded on pair[1]."""
        def pull(now: float, tokens: int) -> float:
            return self.transfer(pair, now, tokens)
        return pull
