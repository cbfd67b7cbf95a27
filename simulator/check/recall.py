"""`endurance check URL --recall`: send every needle case, one at a time, greedy.

Each case is one non-streaming Anthropic Messages request (temperature 0). A length the
server cannot take is reported as beyond its limit, not as a recall failure: known in
advance when the server states its window (vLLM's and the twin's `max_model_len`,
llama.cpp's `n_ctx`) and the estimate is over it, or learnt from its context-overflow
error. The cases are built in pure code (`needle.py`); this module only talks HTTP.

A conformance check too (issue 38): only a Messages reply is scored — HTTP 200, a JSON
content type and a `{"type": "message", "content": [...]}` object; an event stream,
an HTML page or any other shape is an error case, never a miss. `timeout_s` bounds the
whole check (each request gets what is left; cases left when it is spent are errors,
not run), and a server whose `GET /v1/models` lies ends the check in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import aiohttp

from simulator.check.client import SPENT, CheckClient, RawReply
from simulator.check.compare import served_model
from simulator.check.needle import BEYOND, ERROR, HIT, MISS, Outcome, build_case, recalled
from simulator.check.openai_checks import context_window
from simulator.endpoints.base import ErrorType, classify_status
from simulator.errors import RunError
from simulator.twin.serve.server import TWIN_FIELD
from simulator.util.jsontypes import JSONObject, JSONValue, as_list, as_object

MAX_TOKENS = 48     # a small model often restates the question before the value


@dataclass(frozen=True, slots=True)
class RecallReport:
    """Every outcome, with what the run knew about the server."""

    base_url: str
    model: str
    window: int | None          # the context length the server reports, if any
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    repeats: int
    outcomes: tuple[Outcome, ...]
    elapsed_s: float
    simulated: bool = False     # the endpoint is endurance's twin (it does not search)

    def to_dict(self) -> JSONObject:
        return {"base_url": self.base_url, "model": self.model, "window": self.window,
                "lengths": list(self.lengths), "depths": list(self.depths),
                "repeats": self.repeats, "simulated": self.simulated,
                "elapsed_s": round(self.elapsed_s, 2),
                "outcomes": [{"length": o.length, "depth": o.depth, "status": o.status,
                              "server_tokens": o.server_tokens, "reply": o.reply,
                              "detail": o.detail} for o in self.outcomes]}


def _text(data: JSONValue) -> str:
    return "".join(t for b in as_list(as_object(data).get("content"))
                   if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(t := b.get("text", ""), str))


def _input_tokens(data: JSONValue) -> int | None:
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None
    parts = [usage.get(k) for k in ("input_tokens", "cache_read_input_tokens",
                                    "cache_creation_input_tokens")]
    return sum(p for p in parts if isinstance(p, int)) or None


async def _is_twin(c: CheckClient) -> bool:
    """Does /v1/models carry the twin's identity field?"""
    entries = as_list((await c.get("/v1/models")).json_object().get("data"))
    return any(isinstance(m, dict) and TWIN_FIELD in m for m in entries)


async def _one(c: CheckClient, model: str, length: int, depth: float, repeat: int,
               seed: int, window: int | None) -> Outcome:
    if c.spent():   # not even the prompt: on a busy box building them outlasted --timeout
        return Outcome(length, depth, ERROR, detail=f"TimeoutError: {SPENT}")
    case = build_case(length, depth, repeat, seed)
    if window is not None and case.tokens_est > window:
        return Outcome(length, depth, BEYOND, detail=f"~{case.tokens_est} tokens > the "
                                                     f"server's {window}-token window")
    body = {"model": model, "max_tokens": MAX_TOKENS, "temperature": 0,
            "messages": [{"role": "user", "content": case.prompt}]}
    try:
        reply = await c.post("/v1/messages", body)
    except (aiohttp.ClientError, TimeoutError) as exc:
        why = str(exc) or ("no reply before the check's --timeout was spent"
                           if isinstance(exc, TimeoutError) else "")
        return Outcome(length, depth, ERROR, detail=f"{type(exc).__name__}: {why}")
    data = reply.json()
    if reply.status != 200:
        text = reply.body.decode("utf-8", errors="replace")
        if classify_status(reply.status, text) is ErrorType.CONTEXT_OVERFLOW:
            return Outcome(length, depth, BEYOND, detail=f"HTTP {reply.status}: "
                                                         f"{reply.snippet(120)}")
        return Outcome(length, depth, ERROR, detail=f"HTTP {reply.status}: "
                                                    f"{reply.snippet(120)}")
    wrong = not_a_message(reply, data)
    if wrong is not None:
        return Outcome(length, depth, ERROR, detail=wrong)
    answer = _text(data)
    return Outcome(length, depth, HIT if recalled(answer, case.expected) else MISS,
                   _input_tokens(data), answer.strip()[:200], f"expected {case.expected}")


def not_a_message(reply: RawReply, data: JSONValue) -> str | None:
    """Why a 200 reply is not a non-streaming Messages reply (None when it is one)."""
    kind = reply.content_type.split(";")[0].strip().lower()
    if kind != "application/json":
        return (f"HTTP 200 {kind or 'with no content type'} is not a Messages reply "
                f"({reply.snippet(60)})")
    if not isinstance(data, dict) or data.get("type") != "message" \
            or not isinstance(data.get("content"), list):
        return f"HTTP 200 JSON is not a Messages object ({reply.snippet(60)})"
    return None


class RecallOptions(TypedDict, total=False):
    """`run_recall_async`'s keyword options (for `run_recall`)."""

    repeats: int
    seed: int
    model: str | None
    api_key: str | None
    timeout_s: float
    progress: Callable[[Outcome], None] | None


async def run_recall_async(base_url: str, lengths: Sequence[int], depths: Sequence[float],
                           *, repeats: int = 1, seed: int = 0, model: str | None = None,
                           api_key: str | None = None, timeout_s: float = 600.0,
                           progress: Callable[[Outcome], None] | None = None
                           ) -> RecallReport:
    """Every (length, depth, repeat) case against `base_url`, in that order."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s:
        c = CheckClient(s, base_url, api_key=api_key, deadline=t0 + timeout_s)
        try:
            used = await served_model(c, model)
            window = await context_window(c, used)
            simulated = await _is_twin(c)
        except (aiohttp.ClientError, TimeoutError) as exc:
            why = " ".join(str(exc).split())[:160] or "no reply"
            if isinstance(exc, TimeoutError):
                why = f"no reply within --timeout {timeout_s:g} s"
            raise RunError(f"{base_url}: GET /v1/models: {type(exc).__name__}: {why}") \
                from None
        out = []
        for length in lengths:
            for depth in depths:
                for r in range(repeats):
                    o = await _one(c, used, length, depth, r, seed, window)
                    out.append(o)
                    if progress is not None:
                        progress(o)
    return RecallReport(base_url, used, window, tuple(lengths), tuple(depths), repeats,
                        tuple(out), loop.time() - t0, simulated)


def run_recall(base_url: str, lengths: Sequence[int], depths: Sequence[float],
               **kw: Unpack[RecallOptions]) -> RecallReport:
    """Blocking wrapper of `run_recall_async` (the CLI)."""
    return asyncio.run(run_recall_async(base_url, lengths, depths, **kw))
