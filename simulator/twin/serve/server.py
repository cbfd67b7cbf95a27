"""The twin as a real HTTP server speaking the Anthropic Messages API (aiohttp).

Routes: `POST /v1/messages` (SSE streaming exactly per the Anthropic protocol, or one
JSON body), `POST /v1/messages/count_tokens`, `GET /v1/models`, `GET /health`,
`GET /metrics` (vLLM names, see `server_metrics`), `GET /debug/requests/{id}` (the
server's own emission time of every token chunk, to compare with client timings; the id
comes back in the `x-endurance-request-id` header).

Per request: tokenise (segment-cached), check the context window, draw a fault, plan the
reply with textgen (seeded by the request content, so a request always gets the same
reply), submit to the `TwinService`, then write what each engine step emitted as one
transport write. Faults and the proxy cut-off live in `_Reply` below.
"""

from __future__ import annotations

import asyncio
import json
from array import array
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field

from aiohttp import web

from simulator.twin.core.config import engine_config
from simulator.twin.core.engine import RequestTooLong, TwinEngine
from simulator.twin.core.sampling import NEUTRAL, SamplingParams
from simulator.twin.core.types import Engine
from simulator.twin.fleet.router import Router, RouterConfig
from simulator.twin.fleet.service import FleetService, session_key
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.pd.policy import PDConfig
from simulator.twin.pd.service import PDService
from simulator.twin.serve import openai_wire, reply, sampling_wire, wire
from simulator.twin.serve.faults import (
    ERROR_REPLIES,
    FaultDecision,
    FaultInjector,
    FaultKind,
    FaultSpec,
)
from simulator.twin.serve.prompt import PromptError, PromptTokenizer
from simulator.twin.serve.server_metrics import CONTENT_TYPE, TwinMetrics
from simulator.twin.serve.service import TwinService
from simulator.twin.serve.stream import ReplyWriter
from simulator.util.jsontypes import JSONObject


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What the server needs besides the service (names are labels, seconds are wall)."""

    model: str
    hardware: str
    context_window: int
    seed: int = 0
    faults: FaultSpec = field(default_factory=FaultSpec)
    cutoff_s: float | None = None
    spec: str = "off"
    time_scale: float = 1.0
    instant: bool = False
    # what a request that sets no sampling field samples with (the model profile's
    # generation config over vLLM's neutral values, `sampling_wire.defaults_of`)
    sampling_defaults: SamplingParams = NEUTRAL
    # tokens that open every reply and stream no text, as vLLM streams this model's
    # replies (`ModelProfile.hidden_opening`: gpt-oss's harmony header, 3)
    hidden_opening: int = 0


SERVICE_KEY = web.AppKey("twin_service", TwinService)


@dataclass(slots=True)
class _State:
    config: ServerConfig
    service: TwinService | FleetService
    tokenizer: PromptTokenizer
    metrics: TwinMetrics
    faults: FaultInjector


STATE_KEY = web.AppKey("twin_state", _State)


def _error(status: int, kind: str, message: str,
           headers: dict[str, str] | None = None, *, chat: bool = False) -> web.Response:
    body = (openai_wire if chat else wire).error_body(kind, message)
    return web.json_response(body, status=status, headers=headers)


MAX_BODY_BYTES = 64 * 2**20      # larger request bodies get 413 request_too_large
OFFLOAD_BYTES = 256 * 2**10      # bodies above this are parsed off the event loop


class BodyTooLarge(Exception):
    pass


async def _parse(request: web.Request) -> dict[str, object]:
    """The JSON object in the body; PromptError (→ 400) for anything else, including
    nesting too deep for the parser; large bodies parse in a thread so other clients'
    streams keep flowing."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BodyTooLarge(f"request body larger than {MAX_BODY_BYTES} bytes") from None
    try:
        text = raw.decode("utf-8")
        body = json.loads(text) if len(raw) < OFFLOAD_BYTES else \
            await asyncio.to_thread(json.loads, text)
    except (ValueError, UnicodeDecodeError):
        raise PromptError("request body is not valid JSON") from None
    except RecursionError:
        raise PromptError("request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise PromptError("request body must be a JSON object")
    return body


# What a hostile but well-formed body can make the prompt encoder raise.
_SHAPE_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


def _bad_body(exc: Exception, *, chat: bool = False) -> web.Response:
    if isinstance(exc, BodyTooLarge):
        return _error(413, "request_too_large", str(exc), chat=chat)
    if isinstance(exc, PromptError):
        return _error(400, "invalid_request_error", str(exc), chat=chat)
    return _error(400, "invalid_request_error",
                  f"request body has the wrong shape ({type(exc).__name__})", chat=chat)


def _max_tokens(body: Mapping[str, object]) -> int:
    value = body.get("max_tokens")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PromptError("max_tokens: expected an integer >= 1")
    return value


async def handle_messages(request: web.Request) -> web.StreamResponse:
    return await _serve(request, chat=False)


async def handle_chat(request: web.Request) -> web.StreamResponse:
    """`POST /v1/chat/completions`: the same engine, OpenAI's wire format."""
    return await _serve(request, chat=True)


async def _serve(request: web.Request, *, chat: bool) -> web.StreamResponse:
    st = request.app[STATE_KEY]
    cfg = st.config
    try:
        raw = await _parse(request)
        body = openai_wire.as_messages_body(raw) if chat else raw
        max_tokens = _max_tokens(body)
        try:
            sampling = sampling_wire.resolve(sampling_wire.request_fields(raw, chat=chat),
                                             cfg.sampling_defaults)
        except ValueError as exc:
            raise PromptError(str(exc)) from None
        prompt = st.tokenizer.encode_body(body)
    except (PromptError, BodyTooLarge, *_SHAPE_ERRORS) as exc:
        return _bad_body(exc, chat=chat)
    try:
        reply.check_window(len(prompt), cfg.context_window)
    except reply.PromptTooLong as exc:
        return _error(400, "invalid_request_error", str(exc), chat=chat)
    decision = st.faults.draw(max_tokens)
    if decision.kind is not None and decision.kind.before_stream:
        status, kind, message = ERROR_REPLIES[decision.kind]
        headers = ({"retry-after": str(st.faults.spec.retry_after_s)}
                   if decision.kind is FaultKind.RATE_LIMIT else None)
        return _error(status, kind, message, headers, chat=chat)
    loop = asyncio.get_running_loop()
    deadline = None if cfg.cutoff_s is None else loop.time() + cfg.cutoff_s
    if decision.kind is FaultKind.SPIKE:
        if deadline is not None and loop.time() + decision.duration_s >= deadline:
            await asyncio.sleep(deadline - loop.time())
            return web.Response(status=524, text="error code: 524")
        await asyncio.sleep(decision.duration_s)
    fmt: wire.ReplyFormat = wire
    if chat:
        opts = raw.get("stream_options")
        fmt = openai_wire.ChatWire(isinstance(opts, dict) and opts.get("include_usage") is True)
    return await _reply(request, st, body, prompt, max_tokens, decision, deadline, fmt,
                        sampling)


async def _reply(request: web.Request, st: _State, body: Mapping[str, object],
                 prompt: array[int],
                 max_tokens: int, decision: FaultDecision,
                 deadline: float | None, fmt: wire.ReplyFormat = wire,
                 sampling: SamplingParams | None = None) -> web.StreamResponse:
    """Plan the reply, submit it to the engine and write it (SSE or JSON)."""
    cfg = st.config
    planned = reply.plan_for(prompt, max_tokens, request.headers,
                             context_window=cfg.context_window, seed=cfg.seed)
    service = st.service
    try:
        if isinstance(service, PDService):      # P/D: prefill (maybe remote), then decode
            service, stream = await service.place(prompt, planned.token_ids,
                                                  session_key(body, request.headers), sampling)
        else:
            if isinstance(service, FleetService):   # a fleet: the router picks the replica
                service = service.pick(prompt, session_key(body, request.headers))
            stream = service.submit(prompt, planned.token_ids, sampling=sampling)
    except RequestTooLong as exc:
        return _error(400, "invalid_request_error", str(exc), chat=fmt is not wire)
    writer = ReplyWriter(request, service, stream, model=str(body.get("model") or cfg.model),
                         stop_reason=planned.stop_reason, decision=decision, deadline=deadline,
                         fmt=fmt, hidden=cfg.hidden_opening)
    if body.get("stream") is True:
        return await writer.stream()
    return await writer.whole()


async def handle_count_tokens(request: web.Request) -> web.Response:
    st = request.app[STATE_KEY]
    try:
        prompt = st.tokenizer.encode_body(await _parse(request))
    except (PromptError, BodyTooLarge, *_SHAPE_ERRORS) as exc:
        return _bad_body(exc)
    return web.json_response({"input_tokens": len(prompt)})


async def handle_models(request: web.Request) -> web.Response:
    st = request.app[STATE_KEY]
    m = st.config.model
    entry = {"type": "model", "id": m, "display_name": f"{m} (simulated on "
             f"{st.config.hardware})", "created_at": "2025-01-01T00:00:00Z",
             "object": "model", "max_model_len": st.config.context_window,
             TWIN_FIELD: twin_identity(st.config)}
    return web.json_response({"data": [entry], "has_more": False, "first_id": m, "last_id": m})


TWIN_HEADER = "x-endurance-twin"
TWIN_FIELD = "endurance_twin"


def twin_identity(cfg: ServerConfig) -> dict[str, object]:
    """How the HTTP twin announces itself (the `/v1/models` field): a client records a
    run against it as simulated, with the time scale (simulated s per wall s)."""
    return {"simulated": True, "hardware": cfg.hardware, "model": cfg.model,
            "spec": cfg.spec, "time_scale": cfg.time_scale,
            "context_window": cfg.context_window,
            # what a request that sets no sampling field samples with
            "sampling_defaults": asdict(cfg.sampling_defaults)}


async def _announce(request: web.Request, response: web.StreamResponse) -> None:
    """Every response, streamed ones included, says it comes from a simulation."""
    cfg = request.app[STATE_KEY].config
    response.headers[TWIN_HEADER] = f"simulated; time-scale={cfg.time_scale:g}"


async def handle_health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def handle_metrics(request: web.Request) -> web.Response:
    st = request.app[STATE_KEY]
    return web.Response(body=st.metrics.render(), headers={"content-type": CONTENT_TYPE})


async def handle_debug(request: web.Request) -> web.Response:
    st = request.app[STATE_KEY]
    record = st.service.debug_record(request.match_info["rid"])
    if record is None:
        return _error(404, "not_found_error", "unknown or expired request id")
    return web.json_response(record)


async def handle_reset_prefix_cache(request: web.Request) -> web.Response:
    """POST /reset_prefix_cache, as vLLM serves it (in its dev mode): `{"success": bool}`,
    false while requests hold blocks; `endurance run --reset-prefix-cache` calls it."""
    engine = request.app[STATE_KEY].service.engine
    ok = isinstance(engine, TwinEngine) and engine.kv_cache_manager.reset_prefix_cache()
    return web.json_response({"success": ok})


async def _not_found(request: web.Request) -> web.Response:
    return _error(404, "not_found_error", f"no route for {request.method} {request.path}")


def create_app(engine: Engine, config: ServerConfig,
               *, tokenizer: PromptTokenizer | None = None,
               replicas: Sequence[Engine] = (), router: Router | None = None,
               pd: PDConfig | None = None, kv_bytes_per_token: float = 0.0,
               ) -> web.Application:
    """The aiohttp app around `engine`; its real-time driver task runs for the app's
    lifetime (started on startup, cancelled on cleanup). With `replicas` (more engines)
    and a `router`: a fleet behind this one URL (`fleet_service`)."""
    metrics = TwinMetrics(config.model)
    engines = [engine, *replicas]
    services = [TwinService(e, time_scale=config.time_scale, instant=config.instant,
                            on_finish=metrics.observe) for e in engines]
    service: TwinService | FleetService = services[0]
    if pd is not None:          # the first pd.decode engines decode, the rest prefill
        service = PDService(services[:pd.decode], services[pd.decode:], pd,
                            kv_bytes_per_token, router.config if router else None)
    elif len(engines) > 1:
        service = FleetService(services, router or Router(RouterConfig(), len(engines)))
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.on_response_prepare.append(_announce)
    faults = FaultInjector(config.faults, config.seed)
    info = {"hardware": config.hardware, "model": config.model, "spec": config.spec,
            "time_scale": f"{config.time_scale:g}"}
    metrics.attach(service, info, spec_enabled=config.spec != "off",
                   faults=faults if config.faults.enabled else None)
    app[STATE_KEY] = _State(config, service, tokenizer or PromptTokenizer(),
                            metrics, faults)
    app[SERVICE_KEY] = services[0]

    async def driver(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(service.run(), name="twin-driver")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    app.cleanup_ctx.append(driver)
    app.router.add_post("/v1/messages", handle_messages)
    app.router.add_post("/v1/chat/completions", handle_chat)
    app.router.add_post("/v1/messages/count_tokens", handle_count_tokens)
    app.router.add_get("/v1/models", handle_models)
    app.router.add_get("/health", handle_health)
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/debug/requests/{rid}", handle_debug)
    app.router.add_post("/reset_prefix_cache", handle_reset_prefix_cache)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    return app


@asynccontextmanager
async def serving(app: web.Application, host: str = "127.0.0.1",
                  port: int = 0) -> AsyncIterator[str]:
    """Serve `app` on host:port (0 = a free port) and yield its base URL; stops on exit.

    A client that disconnects cancels its handler, so the engine stops tracking it."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


def twin_app(hardware: str, model: str, *, spec: str = "off", seed: int = 0,
             time_scale: float = 1.0, instant: bool = False, faults: FaultSpec | None = None,
             cutoff_s: float | None = None, context_window: int | None = None,
             overrides: Mapping[str, object] | None = None,
             replicas: int = 1, router: RouterConfig | None = None,
             pd: PDConfig | None = None,
             ) -> tuple[web.Application, JSONObject]:
    """The HTTP twin for profile names (InputError for unknown ones) and its description;
    `replicas` > 1: that many engines behind `router` (default round robin); `pd`:
    prefill and decode instances instead (`twin.pd.service`)."""
    if pd is not None:
        replicas = pd.cards

    perf = build_perf_model(hardware, model, spec=spec, overrides=overrides)
    settings = engine_config(perf, context_window=context_window)
    window = settings.scheduler.max_model_len
    gen = perf.model.generation_config
    config = ServerConfig(model=model, hardware=hardware, context_window=window, seed=seed,
                          faults=faults or FaultSpec(), cutoff_s=cutoff_s, spec=spec,
                          time_scale=time_scale, instant=instant,
                          sampling_defaults=sampling_wire.defaults_of(
                              gen.values() if gen is not None else None),
                          hidden_opening=perf.model.hidden_opening)
    more = [TwinEngine(p, engine_config(p, context_window=context_window))
            for p in (build_perf_model(hardware, model, spec=spec, overrides=overrides)
                      for _ in range(replicas - 1))]
    fleet = Router(router or RouterConfig(), replicas) if replicas > 1 else None
    app = create_app(TwinEngine(perf, settings), config, replicas=more, router=fleet, pd=pd,
                     kv_bytes_per_token=settings.cache.kv_bytes_per_token)
    return app, perf.describe()


async def serve_forever(app: web.Application, host: str, port: int,
                        announce: Callable[[str], None]) -> None:
    """Serve until cancelled (Ctrl-C), calling `announce(url)` once listening."""
    async with serving(app, host, port) as url:
        announce(url)
        await asyncio.Event().wait()
