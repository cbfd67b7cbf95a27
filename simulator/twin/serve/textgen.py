"""The text the twin emits: deterministic, seeded, code-like.

A reply's length is min(max_tokens, natural length); the natural length is drawn from a
lognormal (median 550, σ 0.7 → mean ≈ 700 tokens) unless given. In code-edit mode a
`repeat_fraction` of the reply reproduces runs of lines from the latest stretch of the
prompt, as real models do when they rewrite code (this is what n-gram speculation
feeds on); the rest is fresh lines, made for this reply from its seed: every few tokens
carry a fresh identifier suffix or number, so fresh text, like a real model's new code
or prose, does not repeat itself and gives an n-gram proposer almost nothing to match
(a fixed pool of lines would repeat across a long session and feed it false matches).

With a target `tokens_per_pass` (a replayed call whose predictability the import
measured) the reply is paced instead: line by line, a copied line (continuing a run of
the prompt's lines) while the reply so far gives fewer reference tokens per forward pass
than the target, a fresh line while it gives more. The reference is the n-gram meter's
(ngram:24, prompt lookup 5: `spec_decode.predictability.REFERENCE`), counted as the
reply grows (`_Pace`), so the figure holds at any reply length: an open-loop copy share
measured on short visible text overshoots on a long reply (issue 37).

Token ids are cl100k (`simulator.util.tokens`); the returned ids are the encoding of the
returned text (the reply goes back as history next turn, so the two must agree).
"""

from __future__ import annotations

import math
import random
import re
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache

from simulator.twin.spec_decode.ngram import NgramIndex, NgramSpec, accepted_length
from simulator.util import tokens as tok
from simulator.util.draws import below

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


# A fresh line's draws are `simulator.util.draws.below`'s (its 18 names' unrolled: the
# hot path): the very same 32-bit words, in the same order, as the seven f-strings it
# was once drawn as (all seven drawn, one kept), in a fifth of the time.


def _draw_names(getrandbits: Callable[[int], int], count: int,
                out: list[tuple[int, int]]) -> None:
    """`count` draws of a name: (index in _NAMES, suffix below 1000)."""
    for _ in range(count):
        w = getrandbits(5)
        while w >= 24:
            w = getrandbits(5)
        d = getrandbits(10)
        while d >= 1000:
            d = getrandbits(10)
        out.append((w, d))


class _Ids:
    """cl100k ids of the runs of whole pretokens a fresh line is made of: a name or
    function word with the one non-letter before it (`(name`, `.load`, ` name`: one
    pretoken), `_` and a suffix (pretokens of their own), a number in runs of three
    digits from the left, an indent as its spaces but one (the next word takes the
    last), punctuation runs with the newline after them (`):\n`: one pretoken)."""

    def __init__(self) -> None:
        ids = tok.piece_ids
        self.name = {before: [ids(before + w) for w in _NAMES] for before in ("", " ", "(")}
        self.func = {before: [ids(before + f) for f in _FUNCS] for before in (" ", ".")}
        self.suffix = [[*ids("_"), *ids(str(d))] for d in range(1000)]     # _417
        self.digits = [ids(str(d)) for d in range(1000)]
        self.two = [ids(f"{d:02d}") for d in range(100)]                  # 12|05
        self.lead = [[], *(ids("    " * (d - 1) + "   ") for d in (1, 2, 3))]
        self.type = [ids(f": {t},") for t in _TYPES]
        self.lit = {p: ids(p) for p in (" =", ",", "=", ")\n", "if", " if", " >", " ", ":",
                                        "for", " for", " in", "):\n", "return", " return",
                                        ")", " +", "\n", "def", " def", "#", " #", "[",
                                        "]")}

    def number(self, n: int) -> list[int]:
        """A number below 100,000: cl100k's pattern takes digits three at a time."""
        if n < 1000:
            return self.digits[n]
        if n < 10_000:
            return [*self.digits[n // 10], *self.digits[n % 10]]
        return [*self.digits[n // 100], *self.two[n % 100]]


@lru_cache(maxsize=1)
def _ids() -> _Ids:
    return _Ids()


def _fresh(rng: random.Random) -> tuple[str, list[int]]:
    """A fresh line and its cl100k ids: a code-like line that does not repeat earlier
    text (each name gets a numeric suffix drawn per line, which cl100k splits as name,
    `_`, 417, so any 5 consecutive tokens contain a fresh draw), its ids put together
    from its pieces' ids (`_Ids`: boundaries that are pretoken boundaries in any text
    of such lines)."""
    gb = rng.getrandbits
    depth = below(gb, 4)                                # randint(0, 3)
    fw, fd = below(gb, 16), below(gb, 1000)             # f = choice(_FUNCS)_randrange(1000)
    n = below(gb, 100_000)                              # randrange(100_000)
    names: list[tuple[int, int]] = []
    _draw_names(gb, 11, names)                          # forms 1–4, form 5's first
    ty = below(gb, 8)                                   # form 5's choice(_TYPES)
    _draw_names(gb, 2, names)                           # form 5's second, form 6's first
    fn2 = below(gb, 16)                                 # form 6's choice(_FUNCS)
    _draw_names(gb, 5, names)                           # form 6's last two, form 7's
    form = below(gb, 7)                                 # choice(forms)

    t = _ids()
    lit, suffix, num = t.lit, t.suffix, t.number(n)
    ind = "    " * depth
    f = f"{_FUNCS[fw]}_{fd}"
    sp = " " if depth else ""
    first, space, paren = t.name[sp], t.name[" "], t.name["("]
    out = list(t.lead[depth])
    if form == 0:
        (a, da), (b, db), (c, dc) = names[0:3]
        text = f"{ind}{_NAMES[a]}_{da} = {f}({_NAMES[b]}_{db}, {_NAMES[c]}_{dc}={n})\n"
        out += [*first[a], *suffix[da], *lit[" ="], *t.func[" "][fw], *suffix[fd],
                *paren[b], *suffix[db], *lit[","], *space[c], *suffix[dc], *lit["="], *num,
                *lit[")\n"]]
    elif form == 1:
        (a, da), (b, db), (c, dc) = names[3:6]
        text = f"{ind}if {_NAMES[a]}_{da} > {n}: {_NAMES[b]}_{db}.{f}({_NAMES[c]}_{dc})\n"
        out += [*lit[sp + "if"], *space[a], *suffix[da], *lit[" >"], *lit[" "], *num,
                *lit[":"], *space[b], *suffix[db], *t.func["."][fw], *suffix[fd], *paren[c],
                *suffix[dc], *lit[")\n"]]
    elif form == 2:
        (a, da), (b, db) = names[6:8]
        text = f"{ind}for {_NAMES[a]}_{da} in {f}({_NAMES[b]}_{db}, {n}):\n"
        out += [*lit[sp + "for"], *space[a], *suffix[da], *lit[" in"], *t.func[" "][fw],
                *suffix[fd], *paren[b], *suffix[db], *lit[","], *lit[" "], *num,
                *lit["):\n"]]
    elif form == 3:
        (a, da), (b, db) = names[8:10]
        text = f"{ind}return {f}({_NAMES[a]}_{da}) + {_NAMES[b]}_{db}\n"
        out += [*lit[sp + "return"], *t.func[" "][fw], *suffix[fd], *paren[a], *suffix[da],
                *lit[")"], *lit[" +"], *space[b], *suffix[db], *lit["\n"]]
    elif form == 4:
        (a, da), (b, db) = names[10:12]
        text = f"{ind}def {f}({_NAMES[a]}_{da}: {_TYPES[ty]}, {_NAMES[b]}_{db}={n}):\n"
        out += [*lit[sp + "def"], *t.func[" "][fw], *suffix[fd], *paren[a], *suffix[da],
                *t.type[ty], *space[b], *suffix[db], *lit["="], *num, *lit["):\n"]]
    elif form == 5:
        (a, da), (b, db), (c, dc) = names[12:15]
        text = f"{ind}# {_NAMES[a]}_{da} {_FUNCS[fn2]} {_NAMES[b]}_{db} {n} {_NAMES[c]}_{dc}\n"
        out += [*lit[sp + "#"], *space[a], *suffix[da], *t.func[" "][fn2], *space[b],
                *suffix[db], *lit[" "], *num, *space[c], *suffix[dc], *lit["\n"]]
    else:
        (a, da), (b, db), (c, dc) = names[15:18]
        text = f"{ind}{_NAMES[a]}_{da}[{n}] = {_NAMES[b]}_{db}.{f}({_NAMES[c]}_{dc})\n"
        out += [*first[a], *suffix[da], *lit["["], *num, *lit["]"], *lit[" ="], *space[b],
                *suffix[db], *t.func["."][fw], *suffix[fd], *paren[c], *suffix[dc],
                *lit[")\n"]]
    return text, out


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
    _assemble_into(rng, target, source, copy_frac, edit_prob, parts, [], sys.maxsize)
    return "".join(parts)


def _whole_lines(source: list[str]) -> bool:
    """Whether every line ends in a newline (`splitlines` also ends lines at `\\r`, form
    feeds, U+2028…): the lines are non-blank, so a newline followed by the next line
    ends a cl100k pretoken, and a text of such lines has its lines' ids one after another
    (`tokens`, "texts whose ids are known")."""
    return all(ln[-1] == "\n" for ln in source)


def _assemble_into(rng: random.Random, target: int, source: list[str], copy_frac: float,
                   edit_prob: float, parts: list[str], ids: list[int], stop: int) -> None:
    """`_assemble`'s lines appended to `parts` and their ids, one line after another, to
    `ids` (the text's ids when `source`'s lines are whole: `_whole_lines`); it ends
    early once `ids` holds `stop` tokens, as a reply cut there does not depend on the
    lines after."""
    enc = tok.encoding()
    est = 0
    goal = target + 24
    while est < goal and len(ids) < stop:
        if source and rng.random() < copy_frac:
            run = rng.randint(COPY_RUN_MIN, COPY_RUN_MAX)
            i = rng.randrange(max(len(source) - run, 0) + 1)
            for ln in source[i:i + run]:
                if rng.random() < edit_prob:          # the edit itself
                    ln = _edit_line(rng, ln)
                parts.append(ln)
                est += max(1, len(ln) // 4)
                ids += enc.encode_ordinary(ln)
                if len(ids) >= stop:                  # the rest of the run is cut off
                    return
        else:
            for _ in range(rng.randint(1, 3)):
                ln, line_ids = _fresh(rng)
                parts.append(ln)
                ids += line_ids
                est += max(1, len(ln) // 3)


# the reference meter's proposer (spec_decode.predictability.REFERENCE: ngram:24, prompt
# lookup 5-5, vLLM's default bounds), which a paced reply's tokens per pass aim at
PACE_SPEC = NgramSpec(24)


class _Pace:
    """Reference forward passes of a reply as it grows, after its prompt: the engine's
    own proposer (`NgramIndex`) walked pass by pass, each pass's extent fixed once its
    draft and acceptance lie wholly inside the known tokens (the rest recounted)."""

    __slots__ = ("base", "done", "index", "length", "passes", "tokens")

    def __init__(self, prompt: Sequence[int]) -> None:
        self.tokens: list[int] = list(prompt)
        self.base = len(self.tokens)
        self.index = NgramIndex(PACE_SPEC, self.tokens, self.base + 1)
        self.length, self.done = self.base + 1, 1     # the prefill pass samples one

    def extend(self, ids: Sequence[int]) -> None:
        self.tokens.extend(ids)

    def rate(self) -> float:
        """Reply tokens per pass so far (1 with none)."""
        total = len(self.tokens)
        if total <= self.base:
            return 1.0
        k = PACE_SPEC.num_speculative_tokens
        length, passes = self.length, self.done
        while length < total:
            start, count = self.index.propose(length)
            acc = accepted_length(self.tokens, start, count, length, total - length - 1) \
                if count else 0
            if length + count + 1 <= total and length + k + 1 <= total:
                self.length, self.done = length + acc + 1, passes + 1   # fixed for good
            length += min(acc + 1, total - length)
            passes += 1
        return (total - self.base) / passes


def _paced(rng: random.Random, target: int, source: list[str], prompt: Sequence[int],
           tokens_per_pass: float, edit_prob: float) -> tuple[str, list[int]]:
    """Lines until ≈ target tokens, copied (a run of `source` lines, `edit_prob` of them
    edited) while the reply's reference tokens per pass are below `tokens_per_pass`,
    fresh while they are above: (text, its lines' ids one after another, the text's
    ids when `source` is `_whole_lines`)."""
    enc = tok.encoding()
    pace = _Pace(prompt)
    parts: list[str] = []
    at: int | None = None              # the next line of the current copied run
    while len(pace.tokens) - pace.base < target + 24:
        if source and pace.rate() < tokens_per_pass:
            if at is None or at >= len(source):
                at = rng.randrange(len(source))
            ln = source[at]
            at += 1
            if rng.random() < edit_prob:
                ln = _edit_line(rng, ln)
            pace.extend(enc.encode_ordinary(ln))
        else:
            at = None
            ln, ids = _fresh(rng)
            pace.extend(ids)
        parts.append(ln)
    return "".join(parts), pace.tokens[pace.base:]


def copy_share(code_edit: bool, repeat_fraction: float) -> float:
    """The share of an unpaced reply copied from its prompt (`plan_reply`'s)."""
    return min(max(repeat_fraction, 0.0), 1.0) if code_edit else 0.0


def plan_reply(prompt_tokens: Sequence[int], max_tokens: int, *, seed: int,
               natural_tokens: int | None, code_edit: bool,
               repeat_fraction: float,
               edit_share: float = EDIT_LINE_PROB,
               tokens_per_pass: float | None = None) -> tuple[str, list[int]]:
    """The reply the twin will emit for a prompt: (text, cl100k token ids).

    Length = min(max_tokens, natural_tokens or a lognormal draw). `edit_share`: the
    share of copied lines the edit changes (fewer: longer verbatim runs).
    `tokens_per_pass` (≥ 1): pace the reply to that reference predictability instead of
    copying a `repeat_fraction` of it (code_edit then does not matter). Deterministic in
    (prompt tail, max_tokens, seed, natural_tokens, code_edit, repeat_fraction,
    edit_share, tokens_per_pass).
    """
    if max_tokens <= 0:
        return "", []
    rng = random.Random(seed)
    natural = natural_tokens if natural_tokens is not None else natural_length(rng)
    target = max(1, min(max_tokens, natural))
    enc = tok.encoding()
    share = min(max(edit_share, 0.0), 1.0)
    ids: list[int]
    if tokens_per_pass is not None:
        tail = list(prompt_tokens[-SOURCE_WINDOW_TOKENS:])
        source = _source_lines(tail)
        text, ids = _paced(rng, target, source, tail, tokens_per_pass, share)
        if not _whole_lines(source):
            ids = enc.encode_ordinary(text)
    else:
        frac = copy_share(code_edit, repeat_fraction)
        source = _source_lines(prompt_tokens) if frac > 0 else []
        if _whole_lines(source):       # each line's ids found apart, none past the cut
            parts: list[str] = []
            ids = []
            _assemble_into(rng, target, source, frac, share, parts, ids, target)
            while len(ids) < target:       # estimate fell short: add fresh lines
                _assemble_into(rng, target - len(ids), [], 0.0, EDIT_LINE_PROB, parts, ids,
                               target)
            text = "".join(parts)
        else:
            text = _assemble(rng, target, source, frac, share)
            ids = enc.encode_ordinary(text)
    while len(ids) < target:                   # estimate fell short: add fresh lines
        text += _assemble(rng, target - len(ids), [], 0.0)
        ids = enc.encode_ordinary(text)
    if len(ids) > target:                      # cut at a token; ids decode to the text
        ids = ids[:target]
        text = enc.decode(ids)
    return text, ids
