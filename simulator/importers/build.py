"""Parsed transcripts → a replay scenario (plain data ready for YAML).

Two steps. First a fit: the transcript gives each call's recorded prompt size P but
not the system prompt, the tools or the tokenizer; with the prefix S known (scenario
defaults or the given files) and the history's cl100k size C and framing F replayed
call by call, the token scale r = Σ(P−S−F)·C / ΣC² makes the replay's sizes match the
recorded ones (whether earlier thinking stays in context is chosen by the better
fit). Then every text is anonymised at that scale (or kept verbatim on request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from simulator import tokens
from simulator.importers.anonymize import Anonymizer
from simulator.importers.claude_code import SPAWN_TOOLS, RawBlock, RawCall, RawSession, Transcript
from simulator.protocol.messages import BLOCK_OVERHEAD_TOKENS, MESSAGE_OVERHEAD_TOKENS

BUILTIN_TOOLS = frozenset({
    "Task", "Agent", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "NotebookEdit",
    "WebFetch", "WebSearch", "TodoWrite", "ExitPlanMode", "BashOutput", "KillShell",
    "KillBash", "SlashCommand", "MultiEdit", "Skill", "AskUserQuestion", "LS"})
SAFE_KEYS = frozenset({
    "file_path", "path", "pattern", "command", "description", "old_string", "new_string",
    "content", "prompt", "subagent_type", "query", "url", "glob", "type", "output_mode",
    "limit", "offset", "replace_all", "todos", "edits", "notebook_path", "new_source",
    "cell_id", "cell_type", "edit_mode", "timeout", "run_in_background", "head_limit",
    "-n", "-i", "-A", "-B", "-C", "multiline", "plan", "shell_id", "bash_id", "filter",
    "skill", "questions", "allowed_domains", "blocked_domains", "model"})
_ARG_KINDS = {"old_string": "code", "new_string": "code", "content": "code",
              "new_source": "code", "command": "bash"}
_RESULT_KINDS = {"Read": "code", "Grep": "grep", "Glob": "grep", "Bash": "bash"}
_EXTRA = {"tool_use": 8, "tool_result": 6}
MIN_FIT_POINTS = 20     # calls with usage needed before the token scale is fitted


def _block_count(b: RawBlock, cache: dict[int, int]) -> int:
    n = cache.get(id(b))
    if n is None:
        text = json.dumps(b.args or {}, separators=(",", ":")) if b.kind == "tool_use" else b.text
        n = tokens.count(text)
        cache[id(b)] = n
    return n


@dataclass
class Fit:
    scale: float
    thinking_in_context: bool
    residual_share: float            # RMS of (replay − recorded) / recorded at this fit
    points: int
    free_prefix_tokens: float | None = None   # S from a free (S, r) regression, for info


@dataclass
class _Point:
    p: float
    c: float
    f: float


def _points(sessions: list[RawSession], thinking: bool, cache: dict[int, int]) -> list[_Point]:
    pts: list[_Point] = []
    for s in sessions:
        hist: list[list[RawBlock]] = []
        for call in s.calls:
            user = call.user
            if call.compaction is not None:
                hist, user = [], user[call.compaction[2]:]
            if user:
                hist.append(user)
            if call.usage is not None:
                blocks = [b for m in hist for b in m]
                c = sum(_block_count(b, cache) for b in blocks)
                f = MESSAGE_OVERHEAD_TOKENS * len(hist) + sum(
                    BLOCK_OVERHEAD_TOKENS + _EXTRA.get(b.kind, 0) for b in blocks)
                p = call.usage["input_tokens"] + call.usage["cache_read_input_tokens"] \
                    + call.usage["cache_creation_input_tokens"]
                if p > 0:
                    pts.append(_Point(p, c, f))
            reply = [b for b in call.assistant if thinking or b.kind != "thinking"]
            if reply:
                hist.append(reply)
    return pts


def fit_scale(sessions: list[RawSession], prefix_tokens: int) -> Fit:
    """The token scale (and thinking choice) that best reproduces recorded prompts."""
    cache: dict[int, int] = {}
    best: Fit | None = None
    for thinking in (False, True):
        pts = _points(sessions, thinking, cache)
        den = sum(q.c * q.c for q in pts)
        r = sum((q.p - prefix_tokens - q.f) * q.c for q in pts) / den if den else 1.0
        r = min(4.0, max(0.25, r))
        err = [((prefix_tokens + q.f + r * q.c) - q.p) / q.p for q in pts]
        rms = (sum(e * e for e in err) / len(err)) ** 0.5 if err else 0.0
        if best is None or rms < best.residual_share - 1e-9:
            best = Fit(r, thinking, rms, len(pts), _free_prefix(pts))
    assert best is not None
    if best.points < MIN_FIT_POINTS or best.scale in (0.25, 4.0):   # too little to fit
        return Fit(1.0, False, best.residual_share, best.points, best.free_prefix_tokens)
    return best


def _free_prefix(pts: list[_Point]) -> float | None:
    """Intercept of P − F = S + r·C by least squares (None if degenerate)."""
    n = len(pts)
    if n < 3:
        return None
    mx = sum(q.c for q in pts) / n
    my = sum(q.p - q.f for q in pts) / n
    sxx = sum((q.c - mx) ** 2 for q in pts)
    if sxx <= 0:
        return None
    slope = sum((q.c - mx) * (q.p - q.f - my) for q in pts) / sxx
    return my - slope * mx


@dataclass
class Encoder:
    """Turns raw blocks into replay blocks: spans (default) or verbatim texts."""

    scale: float
    keep_content: bool
    anon: Anonymizer = field(init=False)
    texts: list[str] = field(default_factory=list)
    _text_ids: dict[str, int] = field(default_factory=dict)
    _tool_ids: dict[str, str] = field(default_factory=dict)
    _tool_names: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.anon = Anonymizer(self.scale)

    def ref(self, text: str, kind: str) -> dict[str, Any]:
        if self.keep_content:
            idx = self._text_ids.setdefault(text, len(self.texts))
            if idx == len(self.texts):
                self.texts.append(text)
            return {"text": idx, "tokens": tokens.count(text)}
        ranges, first = self.anon.spans(text, kind)
        out: dict[str, Any] = {"spans": ranges,
                               "tokens": round(tokens.count(text) * self.scale) if text else 0}
        if first is not None:
            out["numbered_from"] = first
        return out

    def tool_id(self, orig: str | None) -> str:
        return self._tool_ids.setdefault(orig or "", f"toolu_{len(self._tool_ids):05d}")

    def tool_name(self, name: str | None) -> str | None:
        if name is None or name in BUILTIN_TOOLS or self.keep_content:
            return name
        return self._tool_names.setdefault(name, f"mcp__tool_{len(self._tool_names)}")

    def block(self, b: RawBlock) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": b.kind}
        if b.kind == "tool_use":
            d.update(tokens=0, tool=self.tool_name(b.tool), id=self.tool_id(b.id),
                     args=[self._arg(i, k, v) for i, (k, v) in enumerate((b.args or {}).items())])
            d["tokens"] = sum(a["tokens"] for a in d["args"]) + 8
            return d
        kind = _RESULT_KINDS.get(b.tool or "", "prose") if b.kind == "tool_result" else "prose"
        d.update(self.ref(b.text, kind))
        if b.kind == "tool_result":
            d.update(tool=self.tool_name(b.tool), id=self.tool_id(b.id), is_error=b.is_error)
        if b.summary:
            d["summary"] = True
        return d

    def _arg(self, i: int, key: str, value: Any) -> dict[str, Any]:
        name = key if key in SAFE_KEYS or self.keep_content else f"arg{i}"
        if isinstance(value, bool | int | float) and not isinstance(value, str):
            return {"key": name, "value": value, "tokens": tokens.count(json.dumps(value))}
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return {"key": name, **self.ref(text, _ARG_KINDS.get(key, "prose"))}


def call_data(call: RawCall, enc: Encoder) -> dict[str, Any]:
    d: dict[str, Any] = {
        "user": [enc.block(b) for b in call.user],
        "assistant": [enc.block(b) for b in call.assistant],
        "stop_reason": call.stop_reason, "wait_s": round(call.wait_s, 3),
        "wait_kind": call.wait_kind,
        "model_s": round(max(0.0, call.end_ts - call.start_ts), 3)}
    if call.usage is not None:
        u = call.usage
        d["usage"] = {"input_tokens": u["input_tokens"],
                      "cache_read_tokens": u["cache_read_input_tokens"],
                      "cache_creation_tokens": u["cache_creation_input_tokens"],
                      "output_tokens": u["output_tokens"]}
    if call.compaction is not None:
        trig, pre, at = call.compaction
        d["compaction"] = {"trigger": trig if trig in ("auto", "manual") else "other",
                           "pre_tokens": pre, "at": at}
    return d


def link_subagents(t: Transcript) -> dict[int, tuple[int, int]]:
    """Sub-agent session index → (parent session, parent call) by the Task prompt,
    else by time (the latest spawning call that began before the sub-agent)."""
    spawns: list[tuple[int, int, str, float]] = []
    for si, s in enumerate(t.sessions):
        for ci, c in enumerate(s.calls):
            for b in c.assistant:
                if b.kind == "tool_use" and b.tool in SPAWN_TOOLS:
                    spawns.append((si, ci, str((b.args or {}).get("prompt", "")), c.end_ts))
    links: dict[int, tuple[int, int]] = {}
    for si, s in enumerate(t.sessions):
        if not s.sidechain:
            continue
        cands = [x for x in spawns if x[0] != si and x[2] and x[2] == s.first_prompt]
        if not cands:
            cands = [x for x in spawns if x[0] != si and x[3] <= s.first_ts + 1.0]
            cands.sort(key=lambda x: x[3])
        if cands:
            links[si] = (cands[-1][0], cands[-1][1])
    return links
