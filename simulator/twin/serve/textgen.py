"""The text the twin emits: deterministic, seeded, code-like.

A reply's length is min(max_tokens, natural length); the natural length is drawn from a
lognormal (median 550, σ 0.7 → mean ≈ 700 tokens) unless given. In code-edit mode a
`repeat_fraction` of the reply reproduces runs of lines from the latest stretch of the
prompt, as real models do when they rewrite code (this is what n-gram speculation
feeds on); the rest is fresh lines, made for this reply from its seed: every few tokens
carry a fresh identifier suffix or number, so fresh text, like a real model's new code
or prose, does not repeat itself and gives an n-gram proposer almost nothing to match
(a fixed pool of lines would repeat across a long session and feed it false matches).

Token ids are cl100k (`simulator.util.tokens`); the returned ids are the encoding of the
returned text (the reply goes back as history next turn, so the two must agree).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence

from simulator.util import tokens as tok

NATURAL_MEDIAN_TOKENS = 550.0
NATURAL_SIGMA = 0.7
MIN_NATURAL_TOKENS = 16
MAX_NATURAL_TOKENS = 8192
SOURCE_WINDOW_TOKENS = 6000      # how far back in the prompt copied code is looked for
# Copied runs of 20–60 lines with 8% of their lines changed, each change one identifier
# or number replaced in place (a rename, a new constant) rather than a new tail: fitted
# to the published n-gram rows (profiles/calibration/) (depth 5 / 12 / 24 → 259 / 364 / 575 tok/s, the ratio
# depth 24 ÷ depth 5 = 2.22). The earlier 8–48 lines, 10% edited, each edit a new
# ~6-token tail, gave ~8 tokens per pass at depth 24 and a ratio of ~1.8: every edit
# costs the proposer its edit tokens plus 5 unmatched tokens before the n-gram matches.
COPY_RUN_MIN, COPY_RUN_MAX = 20, 60  # lines copied in one run (an edited block or file)
EDIT_LINE_PROB = 0.08            # copied lines the edit changes (breaks an n-gram run)
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[0-9]+")

_NAMES = ("config", "result", "items", "path", "buffer", "request", "session", "index",
          "tokens", "value", "offset", "handler", "cache", "record", "state", "limit",
          "parser", "stream", "window", "count", "payload", "entry", "client", "blocks")
_FUNCS = ("load", "parse", "update", "render", "flush", "compute", "resolve", "merge",
          "validate", "emit", "collect", "schedule", "encode", "apply", "fetch", "close")
_TYPES = ("int", "str", "float", "bool", "list[int]", "dict[str, int]", "bytes", "None")


def natural_length(rng: random.Random) -> int:
    """A natural reply length in tokens (lognormal, clipped)."""
    x = rng.lognormvariate(math.log(NATURAL_MEDIAN_TOKENS), NATURAL_SIGMA)
    return max(MIN_NATURAL_TOKENS, min(MAX_NATURAL_TOKENS, round(x)))


def _fresh_line(rng: random.Random) -> str:
    """A code-like line that does not repeat earlier text: each name gets a numeric
    suffix drawn per line (cl100k splits `name_417` into name, `_`, 417), so any 5
    consecutive tokens contain a fresh draw."""
    def name() -> str:
        return f"{rng.choice(_NAMES)}_{rng.randrange(1000)}"
    ind = "    " * rng.randint(0, 3)
    f = f"{rng.choice(_FUNCS)}_{rng.randrange(1000)}"
    n = rng.randrange(100_000)
    forms = (
        f"{ind}{name()} = {f}({name()}, {name()}={n})",
        f"{ind}if {name()} > {n}: {name()}.{f}({name()})",
        f"{ind}for {name()} in {f}({name()}, {n}):",
        f"{ind}return {f}({name()}) + {name()}",
        f"{ind}def {f}({name()}: {rng.choice(_TYPES)}, {name()}={n}):",
        f"{ind}# {name()} {rng.choice(_FUNCS)} {name()} {n} {name()}",
        f"{ind}{name()}[{n}] = {name()}.{f}({name()})",
    )
    return rng.choice(forms) + "\n"


def _edit_line(rng: random.Random, line: str) -> str:
    """A copied line as the edit changes it: one identifier or number replaced by a
    fresh one (a changed tail when the line has no word)."""
    words = list(_WORD.finditer(line))
    if not words:
        return line.rstrip("\n") + f"  # {rng.choice(_FUNCS)}_{rng.randrange(1000)}\n"
    m = rng.choice(words)
    return f"{line[:m.start()]}{rng.choice(_NAMES)}_{rng.randrange(1000)}{line[m.end():]}"


def _source_lines(prompt_tokens: Sequence[int]) -> list[str]:
    """Lines of the prompt's latest stretch of text, newline kept, blank ones dropped."""
    tail = list(prompt_tokens[-SOURCE_WINDOW_TOKENS:])
    text = tok.decode(tail) if tail else ""
    lines = [ln for ln in text.splitlines(keepends=True) if ln.strip()]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines[1:] if len(lines) > 1 else lines     # the first may be cut mid-line


def _assemble(rng: random.Random, target: int, source: list[str], copy_frac: float,
              edit_prob: float = EDIT_LINE_PROB) -> str:
    """Lines until ≈ target tokens (+ slack): copied runs from `source` (a share
    `edit_prob` of their lines edited) and fresh ones."""
    parts: list[str] = []
    est = 0
    goal = target + 24
    while est < goal:
        if source and rng.random() < copy_frac:
            run = rng.randint(COPY_RUN_MIN, COPY_RUN_MAX)
            i = rng.randrange(max(len(source) - run, 0) + 1)
            for ln in source[i:i + run]:
                if rng.random() < edit_prob:          # the edit itself
                    ln = _edit_line(rng, ln)
                parts.append(ln)
                est += max(1, len(ln) // 4)
        else:
            for _ in range(rng.randint(1, 3)):
                ln = _fresh_line(rng)
                parts.append(ln)
                est += max(1, len(ln) // 3)
    return "".join(parts)


def plan_reply(prompt_tokens: Sequence[int], max_tokens: int, *, seed: int,
               natural_tokens: int | None, code_edit: bool,
               repeat_fraction: float,
               edit_share: float = EDIT_LINE_PROB) -> tuple[str, list[int]]:
    """The reply the twin will emit for a prompt: (text, cl100k token ids).

    Length = min(max_tokens, natural_tokens or a lognormal draw). `edit_share`: the
    share of copied lines the edit changes (fewer: longer verbatim runs). Deterministic
    in (prompt tail, max_tokens, seed, natural_tokens, code_edit, repeat_fraction,
    edit_share).
    """
    if max_tokens <= 0:
        return "", []
    rng = random.Random(seed)
    natural = natural_tokens if natural_tokens is not None else natural_length(rng)
    target = max(1, min(max_tokens, natural))
    frac = min(max(repeat_fraction, 0.0), 1.0) if code_edit else 0.0
    source = _source_lines(prompt_tokens) if frac > 0 else []
    enc = tok.encoding()
    text = _assemble(rng, target, source, frac, min(max(edit_share, 0.0), 1.0))
    ids: list[int] = enc.encode_ordinary(text)
    while len(ids) < target:                   # estimate fell short: add fresh lines
        text += _assemble(rng, target - len(ids), [], 0.0)
        ids = enc.encode_ordinary(text)
    if len(ids) > target:                      # cut at a token; ids decode to the text
        ids = ids[:target]
        text = enc.decode(ids)
    return text, ids
