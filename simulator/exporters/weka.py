"""A run → cc-traces JSON (`endurance export weka RUN_DIR -o trace.json`).

One trace per top-level session (its sub-agents nested as `type: subagent` entries at
their start time); `hash_ids` number the chained 64-token block hashes of what was
sent, per trace (`hash_id_scope: local`). Only successful turn and summary requests
are written (a failed attempt sent a prompt, but the trace format has no failures).
`in` is the server's prompt size (input + cache read + cache creation) where it
reported one, else the client's estimate; `out` the output tokens.
"""

from __future__ import annotations

from typing import TypedDict

from simulator.exporters.run_requests import RunInfo, SentRequest
from simulator.util.numbers import to_float, to_int


class IdMap:
    """Chained hash → small integer id, from 1 in order of first appearance."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, hashes: list[str]) -> list[int]:
        return [self.ids.setdefault(h, len(self.ids) + 1) for h in hashes]


class Trace(TypedDict):
    """One top-level session's trace, as cc-traces writes it."""

    id: str
    models: list[str]
    block_size: int
    hash_id_scope: str
    tool_tokens: int
    system_tokens: int
    requests: list[dict[str, object]]     # request entries, sub-agents nested


def request_entry(r: SentRequest, t: float, prev_stop: str | None, ids: IdMap
                  ) -> dict[str, object]:
    row = r.row
    prompt = row.get("prompt_tokens")
    stop = row.get("stop_reason") or ""
    d: dict[str, object] = {
        "t": round(t, 3), "type": "s", "model": row.get("model") or None,
        "in": to_int(prompt if prompt is not None else row.get("context_tokens_est") or 0),
        "out": to_int(row.get("output_tokens") or 0), "hash_ids": ids(r.hashes),
        "input_types": ["tool_result"] if prev_stop == "tool_use" else ["text"],
        "output_types": ["text", "tool_use"] if stop == "tool_use" else ["text"],
        "stop": stop}
    if row.get("e2e_s") is not None:
        d["api_time"] = round(to_float(row["e2e_s"]), 3)
    if row.get("ttft_s") is not None:
        d["ttft"] = round(to_float(row["ttft_s"]), 3)
    d["think_time"] = round(to_float(row.get("think_time_s") or 0.0), 3)
    return d


def build_traces(info: RunInfo, requests: list[SentRequest]) -> dict[str, Trace]:
    """Top-level session id → its trace object."""
    by_sid: dict[str, list[SentRequest]] = {}
    for r in requests:
        if r.row.get("ok") and r.row.get("request_kind") in ("turn", "summary"):
            by_sid.setdefault(r.session_id, []).append(r)
    starts = {sid: to_float(rs[0].row["started_mono_s"]) for sid, rs in by_sid.items()}

    def root(sid: str) -> str:
        while sid in info.parents:
            sid = info.parents[sid][0]
        return sid

    ids: dict[str, IdMap] = {}

    def session_requests(sid: str) -> list[dict[str, object]]:
        rs = by_sid.get(sid, [])
        idm = ids.setdefault(root(sid), IdMap())
        out: list[tuple[float, dict[str, object]]] = []
        prev: str | None = None
        for r in rs:
            t = to_float(r.row["started_mono_s"]) - starts[sid]
            out.append((t, request_entry(r, t, prev, idm)))
            stop = r.row.get("stop_reason")
            prev = stop if isinstance(stop, str) else None
        for child, (parent, _) in info.parents.items():
            if parent == sid and child in by_sid:
                c0 = by_sid[child][0]
                t = starts[child] - starts[sid]
                out.append((t, {"t": round(t, 3), "type": "subagent", "agent_id": child,
                                "models": [info.model], "tool_tokens": c0.tools_tokens,
                                "system_tokens": c0.system_tokens,
                                "requests": session_requests(child)}))
        out.sort(key=lambda x: x[0])
        return [e for _, e in out]

    traces: dict[str, Trace] = {}
    for sid, rs in by_sid.items():
        if sid in info.parents:
            continue
        reqs = session_requests(sid)
        for e in _flat(reqs):
            e["model"] = e.get("model") or info.model
        traces[sid] = {"id": f"{info.run_dir.name}:{sid}", "models": [info.model],
                       "block_size": info.block_size, "hash_id_scope": "local",
                       "tool_tokens": rs[0].tools_tokens, "system_tokens": rs[0].system_tokens,
                       "requests": reqs}
    return traces


def _flat(reqs: list[dict[str, object]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for e in reqs:
        if e.get("type") == "subagent":
            sub = e["requests"]           # `session_requests`' list
            out.extend(_flat(sub if isinstance(sub, list) else []))
        else:
            out.append(e)
    return out
