"""A spec_replay fit point's exchanges file, read under bounds (issue 49).

The file is a JSON list of [prompt ids, reply ids] pairs: a real model's own replies in
its own token ids, replayed by the twin (`replay.replay_streams`). It comes from
outside and may be hostile: a FIFO (a read that never returns), `/dev/zero` (a read
that never ends), nesting 100,000 deep, a negative or fractional token id (the twin's
n-gram index would overflow or silently truncate), a reply of a million tokens. Each is
one line naming the file and, for a token, the exchange and position, before it costs
more than a bounded amount of time or memory (`util/bounded.py`'s reader).
"""

from __future__ import annotations

import functools
from pathlib import Path

from simulator.errors import InputError
from simulator.util.bounded import decode_error, json_value, text_file

MAX_EXCHANGES_BYTES = 64 << 20      # ~10M token ids as JSON text
MAX_EXCHANGES = 100_000
MAX_TOKEN_ID = (1 << 31) - 1        # vocabularies hold < 1M ids; int32 as vLLM stores them
MAX_EXCHANGE_TOKENS = 262_144       # prompt + reply of one exchange
# one prediction replays streams × the exchanges' tokens at ~100k tokens/s, and a fit
# predicts each point tens of times
MAX_REPLAY_TOKENS = 2_000_000

Exchange = tuple[tuple[int, ...], tuple[int, ...]]


def _ids(value: object, where: str) -> tuple[int, ...]:
    """A list of token ids: whole numbers (not bools, not fractions) in [0, MAX_TOKEN_ID]."""
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list of token ids")
    for i, t in enumerate(value):
        if not isinstance(t, int) or isinstance(t, bool):
            raise ValueError(f"{where}, token {i}: {str(t)[:40]!r} is not a whole-number "
                             "token id")
        if not 0 <= t <= MAX_TOKEN_ID:
            shown = f"{t:,}" if abs(t) < 10 ** 15 else "a number of 16+ digits"
            raise ValueError(f"{where}, token {i}: {shown} is not a token id "
                             f"(0 to {MAX_TOKEN_ID:,})")
    return tuple(value)


def parse_exchanges(data: object) -> tuple[Exchange, ...]:
    """[prompt ids, reply ids] pairs from a decoded JSON value (pure); ValueError with
    the exchange and token at fault."""
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of [prompt ids, reply ids] pairs")
    if len(data) > MAX_EXCHANGES:
        raise ValueError(f"{len(data):,} exchanges (at most {MAX_EXCHANGES:,})")
    out: list[Exchange] = []
    for n, pair in enumerate(data):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"exchange {n}: expected [prompt ids, reply ids]")
        prompt, reply = _ids(pair[0], f"exchange {n} prompt"), _ids(pair[1], f"exchange {n} reply")
        if len(prompt) + len(reply) > MAX_EXCHANGE_TOKENS:
            raise ValueError(f"exchange {n}: {len(prompt) + len(reply):,} tokens of prompt "
                             f"and reply (at most {MAX_EXCHANGE_TOKENS:,})")
        out.append((prompt, reply))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def load_exchanges(path: str) -> tuple[Exchange, ...]:
    """The exchanges of the file at `path` (remembered: a fit predicts a point many
    times); InputError with one line naming the file otherwise."""
    p = Path(path)
    text = text_file(p, "exchanges file", MAX_EXCHANGES_BYTES)
    try:
        data = json_value(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{p}: exchanges file: {decode_error(exc)}") from None
    try:
        return parse_exchanges(data)
    except ValueError as exc:
        raise InputError(f"{p}: {exc}") from None


def checked_replay(path: str, streams: int, what: str,
                   kv_tokens: int | None = None) -> tuple[Exchange, ...]:
    """The exchanges at `path` replayed by `streams` clients: refused (InputError naming
    `what`) past MAX_REPLAY_TOKENS, or, given `kv_tokens`, for an exchange longer than
    the twin's KV cache (the engine could never admit it)."""
    exchanges = load_exchanges(path)
    work = streams * sum(len(p) + len(r) for p, r in exchanges)
    if work > MAX_REPLAY_TOKENS:
        raise InputError(f"{what}: {streams:,} streams × the exchanges' tokens is {work:,} "
                         f"tokens to replay per prediction (at most {MAX_REPLAY_TOKENS:,}); "
                         "fewer streams or exchanges")
    if kv_tokens is not None:
        for n, (p, r) in enumerate(exchanges):
            if len(p) + len(r) > kv_tokens:
                raise InputError(f"{path}: exchange {n}: {len(p) + len(r):,} tokens exceed "
                                 f"the twin's KV cache of {kv_tokens:,}")
    return exchanges
