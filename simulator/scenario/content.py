"""Seeded synthetic content of a target token size: code, prose, tool output, schemas.

The text looks like what a coding agent sees (Python source, grep hits, shell logs,
JSON tool schemas) so tokenisers and n-gram speculation behave realistically, but it
is generated, deterministic for a seed, and exact in size: we build a little more text
than needed, encode it once and cut it at the target token count.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from itertools import chain

from simulator.util import tokens
from simulator.util.draws import below, pick
from simulator.util.jsontypes import JSONObject

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


# -- lines as pieces -------------------------------------------------------------------
# Each line maker returns its line as pieces (runs of whole cl100k pretokens of the text
# the line sits in), drawing exactly what the plain f-string makers drew, in the same
# order: the ids of the text are then the pieces' memoised ids (`tokens.piece_ids`), with
# no encode. Where the pattern splits: a letter run may be led by one other character
# (" x", "_x", ".x", "(x", ":x", "`x", "\"x"); a punctuation run (with one leading space)
# swallows the newlines after it; a space before a digit or punctuation is its own
# pretoken or leads the run; digits split in threes from the left; indentation is all
# its spaces but one, the last leading the word. So a piece starts at a letter run or at
# " " + a letter, or after a letter/digit at punctuation, and a line's last piece takes
# the newline that follows it (`_synth`). tests/scenario/test_content_counts.py
# checks every maker against the plain makers and `encode_ordinary`.

def _number(n: int, after: str) -> list[str]:
    """" " + n + `after` as pieces: digits split in threes from the left, so the first
    three and the rest (with `after`) are apart (fewer distinct pieces)."""
    digits = str(n)
    return [" " + digits[:3], digits[3:] + after]


def _code_pieces(rng: random.Random, head: str | None = None) -> list[str]:
    """A line of Python as pieces; `head` in place of the drawn indentation (a grep hit
    strips it and puts its line number's end and ":" there). A piece joins at most a
    few hundred to a thousand variants: each is encoded once a process, at its first
    use."""
    bits, idents = rng.getrandbits, _IDENTS
    r = rng.random()
    ind = "    " * below(bits, 4)
    h = ind if head is None else head
    if r < 0.15:
        args: list[str] = []
        n_args = below(bits, 4)
        for i in range(n_args):
            a, b, t = pick(bits, idents), pick(bits, idents), pick(bits, _TYPES)
            args += ("(" if i == 0 else " ") + a, f"_{b}: {t}{',' if i < n_args - 1 else ') ->'}"
        verb, name, ret = pick(bits, _VERBS), pick(bits, idents), pick(bits, _TYPES)
        return [f"{h}def {verb}", f"_{name}" if args else f"_{name}() ->", *args, f" {ret}:"]
    if r < 0.45:
        a, b, verb = pick(bits, idents), pick(bits, idents), pick(bits, _VERBS)
        c, d = pick(bits, idents), pick(bits, idents)
        return [h + a, f"_{b} = self.{verb}", f"({c}_{d},", *_number(below(bits, 4097), ")")]
    if r < 0.6:
        a, b, c, d = pick(bits, idents), pick(bits, idents), pick(bits, idents), \
            pick(bits, idents)
        return [f"{h}if {a}", f"_{b} > {c}", f".{d}:"]
    if r < 0.7:
        return [f"{h}return {pick(bits, idents)}", "_" + pick(bits, idents)]
    if r < 0.8:
        return [h + "#", *[" " + pick(bits, _WORDS) for _ in range(4 + below(bits, 7))]]
    if r < 0.9:
        c, a, b = pick(bits, idents), pick(bits, idents), pick(bits, idents)
        return [f"{h}for {c}", f" in {a}", f"_{b}:"]
    verb, a, b = pick(bits, _VERBS), pick(bits, idents), pick(bits, idents)
    return [f'{h}raise ValueError(f"{verb}', f" {{{a}", f'_{b}}} failed")']


def _prose_pieces(rng: random.Random, lead: str = "") -> list[str]:
    """A sentence as pieces (`lead` before its first word): some words and one `name`
    in backticks, capitalised, with a full stop."""
    bits = rng.getrandbits
    words = [" " + pick(bits, _WORDS) for _ in range(6 + below(bits, 11))]
    at = below(bits, len(words) + 1)
    words[at:at] = [" `" + pick(bits, _VERBS), f"_{pick(bits, _IDENTS)}`"]
    first = words[0][1:]
    words[0] = lead + (first if at == 0 else first.capitalize())
    words[-1] += "."
    return words


def _grep_pieces(rng: random.Random) -> list[str]:
    bits = rng.getrandbits
    path = f"src/{pick(bits, _IDENTS)}/{pick(bits, _IDENTS)}.py:"
    line = str(1 + below(bits, 2000))
    return [path + line[:3], *_code_pieces(rng, line[3:] + ":")]


def _bash_pieces(rng: random.Random) -> list[str]:
    bits = rng.getrandbits
    r = rng.random()
    if r < 0.5:
        a, verb, b = pick(bits, _IDENTS), pick(bits, _VERBS), pick(bits, _IDENTS)
        return [f"tests/test_{a}.py::test_{verb}",
                f"_{b} PASSED" if rng.random() < 0.8 else f"_{b} FAILED"]
    hour = f"[{below(bits, 100):02d}:"
    return [hour, f"{below(bits, 60):02d}]", *_prose_pieces(rng, " ")]


def _prose_line(rng: random.Random) -> str:
    return "".join(_prose_pieces(rng))


_PIECE_MAKERS = {"code": _code_pieces, "prose": _prose_pieces, "grep": _grep_pieces,
                 "bash": _bash_pieces}
_TOKENS_PER_LINE = {"code": 12, "prose": 16, "grep": 18, "bash": 16}


def _synth(kind: str, n_tokens: int, rng: random.Random) -> tuple[list[int], str]:
    """The cl100k ids `synth_text` cuts its text from (at least `n_tokens` of them) and
    their text: the made lines joined by newlines, the ids their pieces' ids (each line's
    last piece with the newline after it, when a line follows)."""
    make = _PIECE_MAKERS[kind]
    per_line = _TOKENS_PER_LINE[kind]
    lines: list[list[str]] = []
    est = 0
    need = n_tokens + 8
    while est < need:
        line = make(rng)
        lines.append(line)
        est += per_line if len(lines) > 4 else sum(map(len, map(tokens.piece_ids, line))) + 1
    ids: list[int] = []
    text: list[str] = []
    while True:
        for line in lines[:-1]:
            line[-1] += "\n"
        pieces = list(chain.from_iterable(lines))
        tokens.extend_piece_ids(ids, pieces)
        text += pieces
        if len(ids) >= n_tokens:
            return ids, "".join(text)
        # our estimate was low: more lines after the last, which takes its newline
        tail, short = lines[-1], n_tokens - len(ids)
        del ids[len(ids) - len(tokens.piece_ids(tail[-1])):]
        tail[-1] += "\n"
        tokens.extend_piece_ids(ids, tail[-1:])
        text[-1] = tail[-1]
        lines = [make(rng) for _ in range(max(4, short // 8))]


def _cut(kind: str, n_tokens: int, rng: random.Random) -> tuple[list[int], str]:
    """The first `n_tokens` of the made ids and their text: the made text less what the
    ids after the cut decode to (a few tokens; the text is ASCII, so a cut between
    tokens is one between characters)."""
    ids, text = _synth(kind, n_tokens, rng)
    over = len(tokens.decode(ids[n_tokens:])) if len(ids) > n_tokens else 0
    return ids[:n_tokens], text[:len(text) - over]


def _line_start(text: str) -> bool:
    """True when `text` can start a line whose newline before it ends a pretoken: not
    blank (over a blank line `\\s*[\\r\\n]+` runs on to the next newline)."""
    return bool(text.strip()) and text[0] not in "\r\n"


def count_of_cut(ids: list[int], text: str) -> int:
    """Exact cl100k count of `text` = decode(ids), where `ids` is a cut of the encoding
    of lines joined by newlines (as `synth_text` makes): the lines before the last
    newline re-encode to the same ids (a newline before a line ends a pretoken), so only the text after it
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
    ids, text = _cut(kind, n_tokens, rng)
    tokens.remember(text, ids)          # a prompt framing it encodes its ends only
    return text


def synth_text_counted(kind: str, n_tokens: int, rng: random.Random) -> tuple[str, int]:
    """`synth_text` (same draws, same text) and the text's exact cl100k count (the cut
    at `n_tokens` may re-encode to a token more or fewer)."""
    if n_tokens <= 0:
        return "", 0
    ids, text = _cut(kind, n_tokens, rng)
    tokens.remember(text, ids)
    return text, count_of_cut(ids, text)


def tool_result_text(kind: str, n_tokens: int, rng: random.Random) -> str:
    """What a tool returns, shaped like Claude Code's tools' outputs."""
    body_kind = {"read": "code", "grep": "grep", "glob": "grep", "bash": "bash",
                 "edit": "prose", "write": "prose", "task": "prose", "todo": "prose",
                 "web": "prose"}.get(kind, "prose")
    return synth_text(body_kind, n_tokens, rng)


def tool_schema(name: str, rng: random.Random, n_tokens: int) -> JSONObject:
    """A realistic-looking tool definition whose JSON is about `n_tokens` long."""
    desc_tokens = max(8, n_tokens - 60)
    props: JSONObject = {}
    for _ in range(rng.randint(2, 5)):
        props[_ident(rng)] = {"type": rng.choice(["string", "integer", "boolean", "array"]),
                              "description": _prose_line(rng)}
    return {
        "name": name,
        "description": synth_text("prose", desc_tokens, rng),
        "input_schema": {"type": "object", "properties": props,
                         "required": [*sorted(props)[:1]]},
    }


_TOOL_NAMES = ("Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "NotebookEdit",
               "WebFetch", "WebSearch", "TodoWrite", "ExitPlanMode", "BashOutput",
               "KillShell", "SlashCommand", "MultiEdit")


def synth_tools(count: int, total_tokens: int, rng: random.Random) -> tuple[JSONObject, ...]:
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


def tools_tokens(tools: tuple[Mapping[str, object], ...]) -> int:
    return tokens.count(json.dumps(list(tools), separators=(",", ":"))) if tools else 0
