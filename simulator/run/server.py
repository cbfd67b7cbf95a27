"""What a run knows about its server, probed once before the run: `ServerInfo`.

Every fact that changes how a run is labelled or timed — simulated or not, the time
scale of an HTTP twin, the context window the server states, where its /metrics are —
is read here from one `GET /v1/models` and travels as this one typed value to the
manifest, the recorder's clock and every shard. A single-process run and a sharded
one therefore cannot disagree on them (they did: a `--workers 2` run against
`twin serve --time-scale 20` was recorded as a real endpoint, issue 23)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from simulator.clock import RunClock
from simulator.endpoints.base import Endpoint
from simulator.endpoints.http.preflight import models as preflight_models
from simulator.records.manifest import Manifest
from simulator.records.prometheus import metrics_url_for
from simulator.util.jsontypes import JSONObject


@dataclass(frozen=True)
class ServerInfo:
    """The server's facts for a run (picklable: shards on other nodes get a copy)."""

    simulated: bool = False
    time_scale: float = 1.0                  # simulated seconds per wall second
    context_limit: int | None = None         # the window the server states, tokens
    metrics_url: str | None = None           # a server's Prometheus endpoint
    twin: Mapping[str, object] | None = field(default=None, compare=False)  # its description
    http_twin: bool = False                  # the twin behind an HTTP URL

    def clock(self) -> RunClock:
        """The run's clock: rate = the server's time scale (1 unless a scaled twin)."""
        return RunClock(rate=self.time_scale)

    def stamp(self, manifest: Manifest) -> Manifest:
        """`manifest` with these facts (as earlier runs wrote them)."""
        if self.http_twin:
            manifest = replace(manifest, simulated=True, time_scale=self.time_scale,
                               http_twin=dict(self.twin or {}))
        if self.context_limit is not None:
            manifest = replace(manifest, server_max_model_len=self.context_limit)
        return manifest

    @classmethod
    def from_models(cls, entries: Sequence[Mapping[str, object]], model: str,
                    base_url: str) -> ServerInfo:
        """The facts in a server's `/v1/models` entries (the twin marks itself with
        `endurance_twin`; vLLM and the twin state `max_model_len`)."""
        twin = next((t for e in entries
                     if isinstance(t := e.get("endurance_twin"), dict)
                     and t.get("simulated") is True), None)
        picked = [e for e in entries if e.get("id") == model] or entries[:1]
        window = picked[0].get("max_model_len") if picked else None
        limit = window if isinstance(window, int) and not isinstance(window, bool) \
            and window > 0 else None
        scale = 1.0
        if twin is not None:
            raw = twin.get("time_scale")
            scale = float(raw) if isinstance(raw, int | float) and raw > 0 else 1.0
        return cls(simulated=twin is not None, time_scale=scale, context_limit=limit,
                   metrics_url=metrics_url_for(base_url), twin=twin,
                   http_twin=twin is not None)

    @classmethod
    def from_manifest(cls, manifest: Manifest, url: str | None) -> ServerInfo:
        """The facts a run recorded (`--resume` continues with them, no new probe)."""
        twin = manifest.http_twin
        return cls(simulated=manifest.simulated, time_scale=manifest.time_scale or 1.0,
                   context_limit=manifest.server_max_model_len,
                   metrics_url=metrics_url_for(url) if url else None,
                   twin=twin, http_twin=bool(twin))

    @classmethod
    def in_process(cls, endpoint: Endpoint) -> ServerInfo:
        """The in-process twin (virtual time: rate 1; its window is the scenario's
        business, not recorded as a server's) or an injected endpoint."""
        return cls(simulated=endpoint.simulated,
                   twin={k: v for k, v in endpoint.describe().items() if k != "profile"}
                   if endpoint.simulated else None)


def models(url: str, timeout_s: float) -> list[JSONObject]:
    """The entries of the server's `/v1/models` (empty when it has none or no answer):
    the pre-flight's bounded read (first-byte, idle, total and size limits), once."""
    return preflight_models(url, timeout_s)


def probe(url: str, timeout_s: float, model: str) -> ServerInfo:
    """One `GET /v1/models`: the server's facts for a run against `url`."""
    return ServerInfo.from_models(models(url, timeout_s), model, url)
