"""Seeded synthetic content of a target token size: code, prose, tool output, schemas.

The text looks like what a coding agent sees (Python source, grep hits, shell logs,
JSON tool schemas) so tokenisers and n-gram speculation behave realistically, but it
is generated, deterministic for a seed, and exact in size: we build a little more text
than needed, encode it once and cut it at the target token count.
"""

from __future__ import annotations

import json
import random
from typing import Any

from simulator.util import tokens

_IDENTS = (
    "session", "request", "tokens", "context", "budget", "history", "message", "result",
    "config", "scheduler", "block", "cache", "prefix", "handler", "payload", "buffer",
    "offset", "limit", "window", "stream", "worker", "queue", "engine", "metrics", "state",
    "parser", "record", "index", "path", "value", "items", "retry", "timeout", "client",
)
_TYPES = ("int", "str", "float", "bool", "list[str]", "dict[str, Any]", "bytes", "None")
_VERBS = ("load", "parse", "build", "apply", "compute", "update", "flush", "fetch", "merge",
          "render", "validate", "encode", "split", "reset", "schedule", "drop", "collect")
_WORDS = ("the", "a", "to", "of", "and", "in", "this", "that", "function", "test", "file",
          "should", "when", "we", "it", "with", "error", "fix", "add", "change", "make",
          "code", "please", "module", "return", "value", "failing", "case", "instead", "now")

# Caps Claude Code applies to tool output before the model sees it (Claude Code's tool documentation),
# converted to tokens at ~4 characters per token.
TOOL_RESULT_CAP_TOKENS: dict[str, int] = {
    "read": 25_000,      # Read: 2,000 lines / 25,000 tokens
    "bash": 7_500,       # 30,000 characters, then a ~2,000-character preview
    "grep": 5_000,       # 20,000 characters
}
BASH_PREVIEW_TOKENS = 500
OTHER_TOOL_CAP_TOKENS = 12_500  # 50,000 characters


def cap_tool_result(kind: str, size_tokens: int) -> int:
    """The size the model actually sees for a tool result of `size_tokens`."""
    if kind == "bash" and size_tokens > TOOL_RESULT_CAP_TOKENS["bash"]:
        return BASH_PREVIEW_TOKENS
    return min(size_tokens, TOOL_RESULT_CAP_TOKENS.get(kind, OTHER_TOOL_CAP_TOKENS))


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_IDENTS)}_{rng.choice(_IDENTS)}"


def _code_line(rng: random.Random) -> str:
    r = rng.random()
    ind = "    " * rng.randint(0, 3)
    if r < 0.15:
        args = ", ".join(f"{_ident(rng)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(0, 3)))
        return f"{ind}def {rng.choice(_VERBS)}_{rng.choice(_IDENTS)}({args}) -> {rng.choice(_TYPES)}:"
    if r < 0.45:
        return f"{ind}{_ident(rng)} = self.{rng.choice(_VERBS)}({_ident(rng)}, {rng.randint(0, 4096)})"
    if r < 0.6:
        return f"{ind}if {_ident(rng)} > {rng.choice(_IDENTS)}.{rng.choice(_IDENTS)}:"
    if r < 0.7:
        return f"{ind}return {_ident(rng)}"
    if r < 0.8:
        return f"{ind}# {' '.join(rng.choice(_WORDS) for _ in range(rng.randint(4, 10)))}"
    if r < 0.9:
        return f"{ind}for {rng.choice(_IDENTS)} in {_ident(rng)}:"
    return f"{ind}raise ValueError(f\"{rng.choice(_VERBS)} {{{_ident(rng)}}} failed\")"


def _prose_line(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 16))]
    words.insert(rng.randint(0, len(words)), f"`{rng.choice(_VERBS)}_{rng.choice(_IDENTS)}`")
    return " ".join(words).capitalize() + "."


def _grep_line(rng: random.Random) -> str:
    return f"src/{rng.choice(_IDENTS)}/{rng.choice(_IDENTS)}.py:{rng.randint(1, 2000)}:" \
        + _code_line(rng).strip()


def _bash_line(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return (f"tests/test_{rng.choice(_IDENTS)}.py::test_{rng.choice(_VERBS)}_"
                f"{rng.choice(_IDENTS)} {'PASSED' if rng.random() < 0.8 else 'FAILED'}")
    return f"[{rng.randint(0, 99):02d}:{rng.randint(0, 59):02d}] {_prose_line(rng)}"


_LINE_MAKERS = {"code": _code_line, "prose": _prose_line, "grep": _grep_line,
                "bash": _bash_line}
_TOKENS_PER_LINE = {"code": 12, "prose": 16, "grep": 18, "bash": 16}


def _synth_ids(kind: str, n_tokens: int, rng: random.Random) -> list[int]:
    """The cl100k ids `synth_text` cuts its text from (at least `n_tokens` of them)."""
    make = _LINE_MAKERS[kind]
    lines: list[str] = []
    est = 0
    need = n_tokens + 8
    while est < need:
        line = make(rng)
        lines.append(line)
        est += _TOKENS_PER_LINE[kind] if len(lines) > 4 else tokens.count(line) + 1
    ids = tokens.encode("\n".join(lines))
    while len(ids) < n_tokens:  # our estimate was low: add more
        more = [make(rng) for _ in range(max(4, (n_tokens - len(ids)) // 8))]
        ids = _encode_more(ids, lines, more)
        lines.extend(more)
    return ids


def _line_start(text: str) -> bool:
    """True when `text` can start a line whose newline before it ends a pretoken: not
    blank (over a blank line `\\s*[\\r\\n]+` runs on to the next newline)."""
    return bool(text.strip()) and text[0] not in "\r\n"


def _encode_more(ids: list[int], lines: list[str], more: list[str]) -> list[int]:
    """The ids of "\\n".join(lines + more), given `ids` of "\\n".join(lines).

    Exact, and only the last line is encoded again: in cl100k's pattern every piece
    that takes a newline ends at it unless more newlines follow, so a "\\n" followed by
    a character other than "\\r"/"\\n" ends a pretoken, BPE never merges across it,
    and encode(a + "\\n" + b) == encode(a + "\\n") + encode(b). Falls back to one
    whole encode for lines starting with a newline (the makers never write any).
    """
    tail = lines[-1]
    if not (_line_start(tail) and all(map(_line_start, more))):
        return tokens.encode("\n".join(lines + more))
    head = len(ids) - tokens.count(tail)
    return ids[:head] + tokens.encode(tail + "\n" + "\n".join(more))


def count_of_cut(ids: list[int], text: str) -> int:
    """Exact cl100k count of `text` = decode(ids), where `ids` is a cut of the encoding
    of lines joined by newlines (as `synth_text` makes): the lines before the last
    newline re-encode to the same ids (see `_encode_more`), so only the text after it
    (a partial line) is encoded again, not the whole text."""
    cut = text.rfind("\n") + 1
    if cut == 0 or not text.isascii():
        return tokens.count(text)
    if cut == len(text):
        return len(ids)
    partial = text[cut:]
    if not _line_start(partial):
        return tokens.count(text)
    # the ids decoding to the partial line: the last few (a line is ~10-20 tokens)
    j = len(ids)
    while j > 0 and len(tokens.decode(ids[j - 1:])) <= len(partial):
        j -= 1
    return j + tokens.count(partial)


def synth_text(kind: str, n_tokens: int, rng: random.Random) -> str:
    """Text of `kind` (code|prose|grep|bash) with exactly-or-nearly `n_tokens` tokens."""
    if n_tokens <= 0:
        return ""
    ids = _synth_ids(kind, n_tokens, rng)[:n_tokens]
    text = tokens.decode(ids)
    tokens.remember(text, ids)          # a prompt framing it encodes its ends only
    return text


def synth_text_counted(kind: str, n_tokens: int, rng: random.Random) -> tuple[str, int]:
    """`synth_text` (same draws, same text) and the text's exact cl100k count (the cut
    at `n_tokens` may re-encode to a token more or fewer)."""
    if n_tokens <= 0:
        return "", 0
    ids = _synth_ids(kind, n_tokens, rng)[:n_tokens]
    text = tokens.decode(ids)
    tokens.remember(text, ids)
    return text, count_of_cut(ids, text)


def tool_result_text(kind: str, n_tokens: int, rng: random.Random) -> str:
    """What a tool returns, shaped like Claude Code's tools' outputs."""
    body_kind = {"read": "code", "grep": "grep", "glob": "grep", "bash": "bash",
                 "edit": "prose", "write": "prose", "task": "prose", "todo": "prose",
                 "web": "prose"}.get(kind, "prose")
    return synth_text(body_kind, n_tokens, rng)


def tool_schema(name: str, rng: random.Random, n_tokens: int) -> dict[str, Any]:
    """A realistic-looking tool definition whose JSON is about `n_tokens` long."""
    desc_tokens = max(8, n_tokens - 60)
    props: dict[str, Any] = {}
    for _ in range(rng.randint(2, 5)):
        props[_ident(rng)] = {"type": rng.choice(["string", "integer", "boolean", "array"]),
                              "description": _prose_line(rng)}
    return {
        "name": name,
        "description": synth_text("prose", desc_tokens, rng),
        "input_schema": {"type": "object", "properties": props,
                         "required": sorted(props)[:1]},
    }


_TOOL_NAMES = ("Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "NotebookEdit",
               "WebFetch", "WebSearch", "TodoWrite", "ExitPlanMode", "BashOutput",
               "KillShell", "SlashCommand", "MultiEdit")


def synth_tools(count: int, total_tokens: int, rng: random.Random) -> tuple[dict[str, Any], ...]:
    """`count` tool definitions totalling about `total_tokens` tokens of JSON."""
    if count <= 0 or total_tokens <= 0:
        return ()
    names = [(_TOOL_NAMES[i] if i < len(_TOOL_NAMES) else f"mcp__tool_{i}") for i in range(count)]
    state = rng.getstate()
    per = max(70, total_tokens // count)
    tools = tuple(tool_schema(n, rng, per) for n in names)
    # One correction pass: the properties add overhead the description must absorb.
    excess = tools_tokens(tools) - total_tokens
    if abs(excess) > count:
        rng.setstate(state)
        per = max(70, per - excess // count)
        tools = tuple(tool_schema(n, rng, per) for n in names)
    return tools


def tools_tokens(tools: tuple[dict[str, Any], ...]) -> int:
    return tokens.count(json.dumps(list(tools), separators=(",", ":"))) if tools else 0
