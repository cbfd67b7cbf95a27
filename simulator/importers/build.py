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

from simulator.importers.anonymize import Anonymizer
from simulator.importers.claude_code import SPAWN_TOOLS, RawBlock, RawCall, RawSession, Transcript
from simulator.protocol.messages import BLOCK_OVERHEAD_TOKENS, MESSAGE_OVERHEAD_TOKENS
from simulator.util import tokens
from simulator.util.jsontypes import JSONObject, JSONValue
from simulator.util.numbers import to_int

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
class _Point:
    p: float
    c: float
    f: float
    session: int = 0


@dataclass
class Fit:
    scale: float
    thinking_in_context: bool
    residual_share: float            # RMS of (replay − recorded) / recorded at this fit
    points: int
    free_prefix_tokens: float | None = None   # S from a free (S, r) regression, for info
    prefixes: list[int | None] = field(default_factory=list)  # per session: system+tools
    errors: list[float] = field(default_factory=list)  # per call: (planned − recorded) / recorded
    points_: list[_Point] = field(default_factory=list, repr=False)


def _points(sessions: list[RawSession], thinking: bool, cache: dict[int, int]) -> list[_Point]:
    """Each call with usage: recorded prompt P, history size C (cl100k) and framing F,
    with the history built as the replay builds it (roles merged so they alternate)."""
    pts: list[_Point] = []
    for si, s in enumerate(sessions):
        hist: list[tuple[str, list[RawBlock]]] = []
        for call in s.calls:
            user = [b for b in call.user if not b.summary]
            if call.compaction is not None:
                hist, user = [], call.user[call.compaction[2]:]
            _add(hist, "user", user)
            if call.usage is not None:
                blocks = [b for _, m in hist for b in m]
                c = sum(_block_count(b, cache) for b in blocks)
                f = MESSAGE_OVERHEAD_TOKENS * len(hist) + sum(
                    BLOCK_OVERHEAD_TOKENS + _EXTRA.get(b.kind, 0) for b in blocks)
                p = call.usage["input_tokens"] + call.usage["cache_read_input_tokens"] \
                    + call.usage["cache_creation_input_tokens"]
                if p > 0:
                    pts.append(_Point(p, c, f, si))
            _add(hist, "assistant", [b for b in call.assistant if thinking or b.kind != "thinking"])
    return pts


def _add(hist: list[tuple[str, list[RawBlock]]], role: str, blocks: list[RawBlock]) -> None:
    if not blocks:
        return
    if hist and hist[-1][0] == role:
        hist[-1] = (role, hist[-1][1] + blocks)
    else:
        hist.append((role, blocks))


def _anchors(pts: list[_Point]) -> dict[int, _Point]:
    first: dict[int, _Point] = {}
    for q in pts:
        first.setdefault(q.session, q)
    return first


def _session_prefixes(pts: list[_Point], r: float, n: int) -> list[int | None]:
    """Each session's system+tools size: its first recorded call minus its history."""
    a = _anchors(pts)
    return [max(0, round(a[i].p - a[i].f - r * a[i].c)) if i in a else None for i in range(n)]


def fit_scale(sessions: list[RawSession], prefix_tokens: int | None = None,
              main_prefix_fixed: bool = False) -> Fit:
    """The token scale, per-session prefixes (and thinking choice) that best reproduce
    the recorded prompts.

    The scale comes from growth since each session's first call (so it does not depend
    on the unknown prefix); each session's prefix is then its first call's recorded
    size (cache creation + cache read + input) minus the replayed history. With
    `main_prefix_fixed` (system/tools files given) main sessions use `prefix_tokens`.
    """
    cache: dict[int, int] = {}
    best: Fit | None = None
    for thinking in (False, True):
        pts = _points(sessions, thinking, cache)
        a = _anchors(pts)
        xs = [(q.c - a[q.session].c, (q.p - q.f) - (a[q.session].p - a[q.session].f)) for q in pts]
        den = sum(x * x for x, _ in xs)
        r = sum(x * y for x, y in xs) / den if den else 1.0
        if len(pts) < MIN_FIT_POINTS or not 0.25 < r < 4.0:   # too little to fit
            r = 1.0
        fit = _evaluate(sessions, pts, r, thinking, prefix_tokens, main_prefix_fixed)
        if best is None or fit.residual_share < best.residual_share - 1e-9:
            best = fit
    assert best is not None
    return best


def _evaluate(sessions: list[RawSession], pts: list[_Point], r: float, thinking: bool,
              prefix_tokens: int | None, fixed: bool) -> Fit:
    pre = _session_prefixes(pts, r, len(sessions))
    if fixed and prefix_tokens is not None:
        pre = [prefix_tokens if not s.sidechain else p for s, p in zip(sessions, pre, strict=True)]
    err = []
    for q in pts:
        s_j = pre[q.session]
        err.append(((s_j or 0) + q.f + r * q.c - q.p) / q.p)
    rms = (sum(e * e for e in err) / len(err)) ** 0.5 if err else 0.0
    return Fit(r, thinking, rms, len(pts), _free_prefix(pts), pre, err, pts)


def planned_errors(fit: Fit, prefixes: list[int], sized_from: list[bool]) -> list[float]:
    """Per call with usage: (planned context − recorded) / recorded, where planned is
    the session's prefix + framing + scale × history as the replay will send it. A
    session's first call is left out when its prefix was sized from it (exact by
    construction, it would flatter the figure)."""
    first = {id(q) for q in _anchors(fit.points_).values()}
    return [(prefixes[q.session] + q.f + fit.scale * q.c - q.p) / q.p for q in fit.points_
            if not (id(q) in first and sized_from[q.session])]


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

    def ref(self, text: str, kind: str) -> JSONObject:
        if self.keep_content:
            idx = self._text_ids.setdefault(text, len(self.texts))
            if idx == len(self.texts):
                self.texts.append(text)
            return {"text": idx, "tokens": tokens.count(text)}
        ranges, first, count = self.anon.spans(text, kind)
        out: JSONObject = {"spans": ranges,
                               "tokens": round(tokens.count(text) * self.scale) if text else 0}
        if first is not None:
            out["numbered_from"] = first
            if count is not None:
                out["numbered_lines"] = count
        return out

    def tool_id(self, orig: str | None) -> str:
        return self._tool_ids.setdefault(orig or "", f"toolu_{len(self._tool_ids):05d}")

    def tool_name(self, name: str | None) -> str | None:
        """Claude Code's own tools keep their names (whatever the version adds: TaskCreate,
        ToolSearch …); only MCP tools (`mcp__server__tool`), which name the user's
        servers, are renamed."""
        if name is None or not name.startswith("mcp__") or self.keep_content:
            return name
        return self._tool_names.setdefault(name, f"mcp__tool_{len(self._tool_names)}")

    def block(self, b: RawBlock) -> JSONObject:
        d: JSONObject = {"kind": b.kind}
        if b.kind == "tool_use":
            args = [self._arg(i, k, v) for i, (k, v) in enumerate((b.args or {}).items())]
            d.update(tokens=0, tool=self.tool_name(b.tool), id=self.tool_id(b.id),
                     args=list[JSONValue](args))
            d["tokens"] = sum(to_int(a["tokens"]) for a in args) + 8
            return d
        kind = _RESULT_KINDS.get(b.tool or "", "prose") if b.kind == "tool_result" else "prose"
        d.update(self.ref(b.text, kind))
        if b.kind == "tool_result":
            d.update(tool=self.tool_name(b.tool), id=self.tool_id(b.id), is_error=b.is_error)
        if b.summary:
            d["summary"] = True
        return d

    def _arg(self, i: int, key: str, value: object) -> JSONObject:
        name = key if key in SAFE_KEYS or self.keep_content else f"arg{i}"
        if isinstance(value, bool | int | float) and not isinstance(value, str):
            return {"key": name, "value": value, "tokens": tokens.count(json.dumps(value))}
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return {"key": name, **self.ref(text, _ARG_KINDS.get(key, "prose"))}


def call_data(call: RawCall, enc: Encoder) -> JSONObject:
    d: JSONObject = {
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
