"""Chained block hashes of every request sent (`blocks.jsonl`), for trace export.

cc-traces and Mooncake traces describe a prompt by the hashes of its token blocks,
each chained to the one before (so a hash names its whole prefix). With
`record_blocks: true` the run's prefix tracker is this subclass: for each request it
tokenizes what was sent (tools → system → messages, cl100k, each segment once by
content digest), cuts it into `BLOCK_SIZE`-token blocks (full blocks only) and writes
one row per attempt: the session, how many leading hashes equal the session's
previous request's (`keep`) and the hashes after them (`new`). Histories grow, so a
row carries only the new blocks. The k-th row of a session belongs to its k-th row
in `turns.jsonl` (one `observe` per attempt sent); a resumed run re-observes stored
replies without a row, so its blocks do not line up (the exporter refuses it).
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from simulator.protocol.messages import Message, Prefix
from simulator.records.prefix import PrefixTracker
from simulator.util import tokens

BLOCKS_JOURNAL = "blocks.jsonl"
BLOCK_SIZE = 64                 # cc-traces' block; Mooncake's 512 is every 8th hash
MAX_SEGMENTS = 4096             # token lists kept by digest (LRU) beyond live sessions'


def chain(prev: str, ids: array[int]) -> str:
    """The hash of one block after `prev` (16 hex digits, as cc-traces)."""
    h = hashlib.blake2b(prev.encode(), digest_size=8)
    h.update(ids.tobytes())
    return h.hexdigest()


@dataclass
class _State:
    digests: list[str] = field(default_factory=list)
    segs: list[array[int]] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)


class BlockRecorder(PrefixTracker):
    """A PrefixTracker that also journals each request's chained block hashes."""

    def __init__(self, path: Path, block_size: int = BLOCK_SIZE) -> None:
        super().__init__()
        self.path, self.block_size = path, block_size
        self._tok: OrderedDict[str, array[int]] = OrderedDict()
        self._state: dict[str, _State] = {}

    def _tokens(self, digest: str, text: str) -> array[int]:
        a = self._tok.get(digest)
        if a is None:
            a = array("I", tokens.encode(text))
            self._tok[digest] = a
            if len(self._tok) > MAX_SEGMENTS:
                self._tok.popitem(last=False)
        else:
            self._tok.move_to_end(digest)
        return a

    def observe(self, session_id: str, prefix: Prefix, messages: tuple[Message, ...],
                tools_text: str) -> int:
        reused = super().observe(session_id, prefix, messages, tools_text)
        self._record(session_id, prefix, messages, tools_text)
        return reused

    def _record(self, session_id: str, prefix: Prefix, messages: tuple[Message, ...],
                tools_text: str) -> None:
        segs = [(prefix.tools_digest, tools_text), (prefix.system_digest, prefix.system)]
        segs += [(m.digest, m.serialize()) for m in messages]
        old = self._state.get(session_id, _State())
        i = 0
        while i < min(len(segs), len(old.digests)) and segs[i][0] == old.digests[i]:
            i += 1
        new = _State([d for d, _ in segs],
                     old.segs[:i] + [self._tokens(d, t) for d, t in segs[i:]])
        same = sum(len(a) for a in new.segs[:i])
        bs = self.block_size
        keep = min(same // bs, len(old.hashes))
        flat = array("I")
        pos = 0
        for a in new.segs:                 # the tokens from block `keep` on
            if pos + len(a) > keep * bs:
                flat.extend(a[max(0, keep * bs - pos):])
            pos += len(a)
        hashes = old.hashes[:keep]
        prev = hashes[-1] if hashes else ""
        for j in range(0, len(flat) - bs + 1, bs):
            prev = chain(prev, flat[j:j + bs])
            hashes.append(prev)
        new.hashes = hashes
        self._state[session_id] = new
        row = {"session_id": session_id, "keep": keep, "new": hashes[keep:], "tokens": pos,
               "tools_tokens": len(new.segs[0]), "system_tokens": len(new.segs[1])}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, separators=(",", ":")) + "\n")

    def forget(self, session_id: str) -> None:
        super().forget(session_id)
        self._state.pop(session_id, None)
