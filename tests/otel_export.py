"""Synthetic OTLP exports of a team's Claude Code day (and GenAI spans) with known sizes
and times, written as an OpenTelemetry Collector's file exporter writes them: JSON
lines (`format: json`) or length-prefixed protobuf (`format: proto`, with the
`opentelemetry-proto` message classes). SYNTHETIC: no real telemetry is in here."""

from __future__ import annotations

import json
import random
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def dumps_attrs(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Attributes in the OTLP/JSON mapping (for tests and the synthetic generator)."""
    out: list[dict[str, Any]] = []
    for k, v in attrs.items():
        if isinstance(v, bool):
            val: dict[str, Any] = {"boolValue": v}
        elif isinstance(v, int):
            val = {"intValue": str(v)}
        elif isinstance(v, float):
            val = {"doubleValue": v}
        else:
            val = {"stringValue": str(v)}
        out.append({"key": k, "value": val})
    return out


DAY0 = 1_796_256_000.0          # 2026-12-03 00:00:00 UTC
MODEL = "claude-sonnet-4-5"


@dataclass
class Req:
    session: str
    start_s: float               # Unix s the request began
    api_s: float
    input: int
    cache_read: int
    cache_write: int
    output: int
    source: str = ""             # query_source ("" main thread)

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


@dataclass
class Day:
    requests: list[Req] = field(default_factory=list)
    tools: list[tuple[str, float, float, str]] = field(default_factory=list)  # (s, start, end, tool)
    prompts: list[tuple[str, float, int]] = field(default_factory=list)       # (s, t, length)


def session_requests(rng: random.Random, sid: str, start: float, n: int, prefix: int,
                     day: Day, *, source: str = "") -> float:
    """`n` requests of a growing Claude Code conversation from `start`; returns its end."""
    t = start
    prompt = prefix + rng.randint(400, 3000)
    cached = prefix
    for k in range(n):
        out = rng.randint(40, 900)
        api = round(1.0 + out / rng.uniform(40, 80), 3)
        new = prompt - cached
        inp = min(rng.randint(1, 12), new)
        day.requests.append(Req(sid, round(t, 3), api, inp, cached, new - inp, out, source))
        end = t + api
        if k == n - 1:
            return end
        if rng.random() < 0.75:                        # a tool ran, then the next request
            dur = round(rng.uniform(0.2, 20.0), 3)
            day.tools.append((sid, end + 0.05, end + 0.05 + dur, rng.choice(
                ["Read", "Bash", "Edit", "Grep"])))
            t = end + 0.05 + dur + rng.uniform(0.05, 0.5)
        else:                                          # the developer thought, typed
            t = end + rng.uniform(5.0, 90.0)
            day.prompts.append((sid, t - 0.01, rng.randint(20, 400)))
        cached = prompt                                # the whole previous prompt cached
        prompt = prompt + out + rng.randint(150, 2600)
    return t


def team_day(seed: int = 0, sessions: int = 24, *, requests: tuple[int, int] = (8, 40),
             prefix: int = 18_000, hours: tuple[float, float] = (8.0, 18.0),
             peak_h: float = 10.5, subagents: float = 0.25) -> Day:
    """A working day: session starts drawn around a morning peak (and an afternoon
    one), each a growing conversation; a share with a sub-agent stream."""
    rng = random.Random(seed)
    day = Day()
    for i in range(sessions):
        h = rng.gauss(peak_h, 0.6) if rng.random() < 0.6 else rng.uniform(*hours)
        h = min(max(h, hours[0]), hours[1])
        start = DAY0 + h * 3600
        sid = f"sess-{i:03d}-{rng.getrandbits(32):08x}"
        end = session_requests(rng, sid, start, rng.randint(*requests), prefix, day)
        if rng.random() < subagents:
            at = start + rng.uniform(0, max(1.0, end - start) / 2)
            session_requests(rng, sid, at, rng.randint(2, 6), prefix // 2, day,
                             source="agent")
        day.prompts.append((sid, start - 0.01, rng.randint(20, 400)))
    return day


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def log_events(day: Day, *, prompt_text: bool = False) -> list[tuple[str, float, dict[str, Any]]]:
    """(event name, Unix s logged, attributes) as Claude Code logs them."""
    ev: list[tuple[str, float, dict[str, Any]]] = []
    for r in day.requests:
        end = r.start_s + r.api_s
        a: dict[str, Any] = {
            "event.name": "api_request", "event.timestamp": _iso(end), "session.id": r.session,
            "model": MODEL, "cost_usd": 0.01, "duration_ms": round(r.api_s * 1000),
            "input_tokens": r.input, "output_tokens": r.output,
            "cache_read_tokens": r.cache_read, "cache_creation_tokens": r.cache_write}
        if r.source:
            a["query_source"] = r.source
        ev.append(("claude_code.api_request", end, a))
    for sid, t0, t1, tool in day.tools:
        ev.append(("claude_code.tool_result", t1, {
            "event.name": "tool_result", "event.timestamp": _iso(t1), "session.id": sid,
            "tool_name": tool, "success": "true", "duration_ms": round((t1 - t0) * 1000),
            "tool_result_size_bytes": 2048}))
    for sid, t, n in day.prompts:
        a = {"event.name": "user_prompt", "event.timestamp": _iso(t), "session.id": sid,
             "prompt_length": n}
        if prompt_text:
            a["prompt"] = "SECRET-PROMPT-TEXT fix the bug in auth.py"
        ev.append(("claude_code.user_prompt", t, a))
    return ev


def _ns(t: float) -> int:
    return round(t * 1e9)


def write_json_logs(path: Path, day: Day, *, batch: int = 50, seed: int = 0,
                    prompt_text: bool = False) -> Path:
    """JSON lines, records shuffled (a Collector keeps no order), `batch` per line."""
    ev = log_events(day, prompt_text=prompt_text)
    random.Random(seed).shuffle(ev)
    res = {"attributes": dumps_attrs({"service.name": "claude-code"})}
    with path.open("w") as fh:
        for i in range(0, len(ev), batch):
            recs = [{"timeUnixNano": str(_ns(t)), "observedTimeUnixNano": str(_ns(t) + 1000),
                     "body": {"stringValue": name}, "attributes": dumps_attrs(a)}
                    for name, t, a in ev[i:i + batch]]
            fh.write(json.dumps({"resourceLogs": [{"resource": res, "scopeLogs": [
                {"scope": {"name": "com.anthropic.claude_code.events"},
                 "logRecords": recs}]}]}) + "\n")
    return path


def _pb_attrs(kvs: Any, attrs: dict[str, Any]) -> None:
    for k, v in attrs.items():
        kv = kvs.add()
        kv.key = k
        if isinstance(v, bool):
            kv.value.bool_value = v
        elif isinstance(v, int):
            kv.value.int_value = v
        elif isinstance(v, float):
            kv.value.double_value = v
        else:
            kv.value.string_value = str(v)


def write_proto_logs(path: Path, day: Day, *, batch: int = 50, seed: int = 0) -> Path:
    """The file exporter's `format: proto`: each LogsData preceded by its length (4 bytes,
    big-endian)."""
    from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
    ev = log_events(day)
    random.Random(seed).shuffle(ev)
    with path.open("wb") as fh:
        for i in range(0, len(ev), batch):
            msg = LogsData()
            rl = msg.resource_logs.add()
            _pb_attrs(rl.resource.attributes, {"service.name": "claude-code"})
            sl = rl.scope_logs.add()
            for name, t, a in ev[i:i + batch]:
                rec = sl.log_records.add()
                rec.time_unix_nano = _ns(t)
                rec.body.string_value = name
                _pb_attrs(rec.attributes, a)
            data = msg.SerializeToString()
            fh.write(struct.pack(">I", len(data)) + data)
    return path


def genai_attrs(r: Req) -> dict[str, Any]:
    return {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": r.session,
            "gen_ai.request.model": MODEL, "gen_ai.usage.input_tokens": r.prompt,
            "gen_ai.usage.cache_read.input_tokens": r.cache_read,
            "gen_ai.usage.cache_creation.input_tokens": r.cache_write,
            "gen_ai.usage.output_tokens": r.output,
            **({"gen_ai.agent.name": r.source} if r.source else {})}


def write_genai(path: Path, day: Day, *, proto: bool = False, batch: int = 50) -> Path:
    """GenAI spans (input_tokens counting the cached ones, as the conventions say) and
    execute_tool spans, as JSON lines or length-prefixed TracesData."""
    spans: list[tuple[str, float, float, dict[str, Any]]] = [
        (f"chat {MODEL}", r.start_s, r.start_s + r.api_s, genai_attrs(r)) for r in day.requests]
    spans += [(f"execute_tool {tool}", t0, t1, {"gen_ai.operation.name": "execute_tool",
                                                "gen_ai.conversation.id": sid,
                                                "gen_ai.tool.name": tool})
              for sid, t0, t1, tool in day.tools]
    if proto:
        from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
        with path.open("wb") as fh:
            for i in range(0, len(spans), batch):
                msg = TracesData()
                ss = msg.resource_spans.add().scope_spans.add()
                for name, t0, t1, a in spans[i:i + batch]:
                    sp = ss.spans.add()
                    sp.name, sp.start_time_unix_nano, sp.end_time_unix_nano = name, _ns(t0), _ns(t1)
                    _pb_attrs(sp.attributes, a)
                data = msg.SerializeToString()
                fh.write(struct.pack(">I", len(data)) + data)
        return path
    with path.open("w") as fh:
        for i in range(0, len(spans), batch):
            out = [{"traceId": "", "spanId": "", "name": name, "startTimeUnixNano": str(_ns(t0)),
                    "endTimeUnixNano": str(_ns(t1)), "attributes": dumps_attrs(a)}
                   for name, t0, t1, a in spans[i:i + batch]]
            fh.write(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [
                {"scope": {}, "spans": out}]}]}) + "\n")
    return path
