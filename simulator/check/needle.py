"""The long-context recall check's pure logic: haystacks, planted facts, matching, table.

A haystack is what a coding agent's context is made of — files it read, grep hits, test
and shell output — synthesised by the scenario content generator, not lorem ipsum, so
the model searches the kind of text it will really have to search. One fact, a code
word assigned in a config line, is planted at a chosen depth (a fraction of the
haystack's tokens); the question at the end asks for it. A reply is right when it
contains the code word (case, spaces and punctuation ignored). Code words are drawn per
case, so a model cannot know one without reading it (chance is ~0).

Lengths are client-side token estimates (cl100k); the server's own count of each
prompt comes back in `usage` and is shown beside it. No I/O here.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simulator.errors import InputError
from simulator.scenario.content import synth_text
from simulator.util import tokens

MAX_LENGTH = 1 << 20           # 1M tokens: beyond any server, and a haystack of ~4 MB

_ADJ = ("amber", "cobalt", "silent", "brisk", "velvet", "hollow", "crimson", "lunar",
        "polar", "rusty", "golden", "misty", "quiet", "bright", "frozen", "wild")
_NOUN = ("falcon", "harbor", "lantern", "meadow", "canyon", "otter", "glacier", "comet",
         "willow", "ember", "summit", "badger", "orchid", "tundra", "beacon", "heron")
# (command the agent ran, content kind of its output, share of the haystack's chunks)
_CHUNKS = (("cat src/{a}/{b}.py", "code", 5), ("grep -rn {b} src/", "grep", 2),
           ("pytest -q tests/test_{a}.py", "bash", 2), ("git log -p src/{a}", "prose", 1))
_IDENTS = ("engine", "cache", "worker", "router", "config", "session", "queue", "store")
QUESTION = ("What is the value of DEPLOY_CODE_WORD in the files above? "
            "Answer with the value only.")
INTRO = "Here is the output of the commands I ran in this repository.\n\n"


@dataclass(frozen=True, slots=True)
class NeedleCase:
    """One prompt: `prompt` holds the haystack with the fact at `depth`, then the
    question; `expected` is the code word; `tokens_est` the prompt's cl100k size."""

    length: int
    depth: float
    repeat: int
    prompt: str
    expected: str
    tokens_est: int


def parse_length(text: str) -> int:
    """'4k' -> 4096, '0.5k' -> 512, '1m' -> 1048576, '3000' -> 3000."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not m:
        raise InputError(f"--lengths: {text!r} is not a token count like 4k, 0.5k or 3000")
    value = float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20}[m.group(2).lower()]
    if not 256 <= value <= MAX_LENGTH:
        raise InputError(f"--lengths: {text!r} must be within 256 tokens and 1m")
    return int(value)


def parse_lengths(text: str) -> tuple[int, ...]:
    """Comma-separated lengths, in the order given, duplicates dropped."""
    out = tuple(dict.fromkeys(parse_length(p) for p in text.split(",") if p.strip()))
    if not out:
        raise InputError("--lengths: give at least one length, e.g. 4k,16k")
    return out


def parse_depths(text: str) -> tuple[float, ...]:
    """Comma-separated fractions of the haystack in [0, 1]."""
    try:
        out = tuple(dict.fromkeys(float(p) for p in text.split(",") if p.strip()))
    except ValueError:
        raise InputError(f"--depths: {text!r} is not a list of fractions like "
                         "0.1,0.5,0.9") from None
    if not out or any(not 0.0 <= d <= 1.0 for d in out):
        raise InputError(f"--depths: {text!r}: every depth must be within [0, 1]")
    return out


def code_word(rng: random.Random) -> str:
    """A fresh code word, e.g. 'cobalt-heron-4821' (16 × 16 × 9000 choices)."""
    return f"{rng.choice(_ADJ)}-{rng.choice(_NOUN)}-{rng.randint(1000, 9999)}"


def _chunks(n_tokens: int, rng: random.Random) -> list[str]:
    """Tool outputs (a header line with the command, then its output) of about
    `n_tokens` in all, in the proportions of `_CHUNKS`."""
    kinds = [c for c in _CHUNKS for _ in range(c[2])]
    out: list[str] = []
    left = n_tokens
    while left > 0:
        cmd, kind, _ = rng.choice(kinds)
        size = min(left, rng.randint(150, 600))
        header = "$ " + cmd.format(a=rng.choice(_IDENTS), b=rng.choice(_IDENTS))
        out.append(f"{header}\n{synth_text(kind, size, rng)}\n")
        left -= size + tokens.count(header) + 2
    return out


def build_case(length: int, depth: float, repeat: int, seed: int = 0) -> NeedleCase:
    """A prompt of about `length` cl100k tokens with the code word's line at `depth`
    (0 the start of the haystack, 1 its end). The haystack is seeded by (seed, length,
    repeat), the same at every depth (only where the fact sits changes, and a server's
    prefix cache can serve the part before it); the code word by the depth too."""
    rng = random.Random(f"needle:{seed}:{length}:{repeat}")
    word = code_word(random.Random(f"word:{seed}:{length}:{depth}:{repeat}"))
    fact = f'DEPLOY_CODE_WORD = "{word}"  # the code word for this deployment\n'
    fixed = tokens.count(INTRO) + tokens.count(fact) + tokens.count(QUESTION) + 2
    lines = "".join(_chunks(max(0, length - fixed), rng)).splitlines(keepends=True)
    budget = sum(tokens.count(x) for x in lines)   # per-line counts: exact enough to place
    target, acc, at = depth * budget, 0, len(lines)
    for i, line in enumerate(lines):
        if acc >= target:
            at = i
            break
        acc += tokens.count(line)
    prompt = INTRO + "".join(lines[:at]) + fact + "".join(lines[at:]) + "\n" + QUESTION
    return NeedleCase(length, depth, repeat, prompt, word, tokens.count(prompt))


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def recalled(reply: str, expected: str) -> bool:
    """The reply names the code word (case, spaces and punctuation ignored)."""
    return bool(expected) and _norm(expected) in _norm(reply)


HIT, MISS, BEYOND, ERROR = "hit", "miss", "beyond", "error"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One case's result: `status` is hit / miss / beyond (the server's context limit
    refused it, or it is longer than the window the server reports) / error."""

    length: int
    depth: float
    status: str
    server_tokens: int | None = None    # the prompt's size by the server's tokenizer
    reply: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Cell:
    """Recall at one (length, depth): hits of the cases that ran, and why others did not."""

    length: int
    depth: float
    hits: int
    ran: int
    beyond: int
    errors: int

    @property
    def recall(self) -> float | None:
        return self.hits / self.ran if self.ran else None

    def label(self) -> str:
        """'3/5', 'beyond limit', 'error' or '2/4 (1 beyond)' for a table."""
        if not self.ran:
            return "beyond limit" if self.beyond and not self.errors else \
                ("error" if self.errors else "-")
        extra = [f"{n} {w}" for n, w in ((self.beyond, "beyond"), (self.errors, "error")) if n]
        return f"{self.hits}/{self.ran}" + (f" ({', '.join(extra)})" if extra else "")


def cells(outcomes: Iterable[Outcome], lengths: Sequence[int],
          depths: Sequence[float]) -> list[list[Cell]]:
    """The table, one row per length and one cell per depth, in the order given."""
    rows: list[list[Cell]] = []
    got = list(outcomes)
    for length in lengths:
        row = []
        for depth in depths:
            mine = [o for o in got if o.length == length and o.depth == depth]
            row.append(Cell(length, depth, sum(o.status == HIT for o in mine),
                            sum(o.status in (HIT, MISS) for o in mine),
                            sum(o.status == BEYOND for o in mine),
                            sum(o.status == ERROR for o in mine)))
        rows.append(row)
    return rows


def length_label(n: int) -> str:
    """4096 -> '4k', 512 -> '0.5k', 3000 -> '3000'."""
    if n % 1024 == 0:
        return f"{n // 1024}k"
    if (n * 2) % 1024 == 0:
        return f"{n / 1024:g}k"
    return str(n)
