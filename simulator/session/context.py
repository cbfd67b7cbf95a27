"""What all agents of a run share (`RunContext`), and how a session ends early.

The agent, the prober and the replay agent all read the run's context and raise these
exceptions; the context lives apart from the agent loop so that the prober (a side
request of a turn) needs nothing of the agent itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simulator.clock import RunClock
from simulator.endpoints.base import Endpoint
from simulator.records.prefix import PrefixTracker
from simulator.records.recorder import Recorder
from simulator.scenario.model import Scenario
from simulator.session.conversation import Prefix
from simulator.session.limiter import Limiter
from simulator.session.resume import ReplayKey, StoredReply

if TYPE_CHECKING:      # a type only: the meter (tiktoken, the n-gram index) loads on use
    from simulator.endpoints.client_meter import ClientMeter


class SessionFailed(Exception):
    """The session exhausted its retries (or hit a non-retryable error)."""


class SessionStopped(Exception):
    """The run is stopping (signal or deadline) while this session waited to retry."""


class FatalEndpointError(Exception):
    """An error that will hit every session alike (bad key, not an Anthropic endpoint)."""


@dataclass
class RunContext:
    """What all agents of a run share."""

    run_id: str
    scenario: Scenario
    endpoint: Endpoint
    recorder: Recorder
    tracker: PrefixTracker
    clock: RunClock
    limiter: Limiter
    base_prefix: Prefix
    tools_text: str
    stop: asyncio.Event
    t0: float
    progress: Callable[[int], None] | None = None    # called with each reply's output tokens
    # Resume: stored replies per session (replayed, not re-sent) and attempts already made.
    replay: dict[str, dict[ReplayKey, StoredReply]] = field(default_factory=dict)
    prior_attempts: dict[tuple[str, int, str], int] = field(default_factory=dict)
    # when each stored reply was sent and answered (simulated s): a replay's clock
    answered: dict[str, dict[ReplayKey, tuple[float, float]]] = field(default_factory=dict)
    # a real server's replies: what n-gram speculation would see, client-tokenised
    ngram_meter: ClientMeter | None = None
