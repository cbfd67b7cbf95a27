"""The reuse tracker's walk from where the session's previous request stops matching
(`records/prefix.PrefixTracker.observe`) against the walk over every segment it
replaced (kept here as the oracle): the same reusable tokens for every request of
random sessions that grow, get compacted, re-send an estimate that differs, restart
from another head, and have their replies counted (`extend`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.protocol.messages import Message, Prefix, TextBlock
from simulator.records.prefix import (
    HEAD_SEGMENTS,
    PrefixTracker,
    _chain,
    _remember,
    _segments,
    _SessionState,
)


class OracleTracker(PrefixTracker):
    """`observe` as it was: every segment chained and looked up in the previous
    request's chain set."""

    def observe(self, session_id: str, prefix: Prefix, messages: tuple[Message, ...],
                tools_text: str) -> int:
        segs = _segments(prefix, messages, tools_text)
        state = self._sessions.setdefault(session_id, _SessionState())
        prev = set(state.chains)
        chains: list[str] = []
        reused = 0
        chain = ""
        matched = True
        for i, seg in enumerate(segs):
            nxt = _chain(chain, seg.digest)
            if matched and (nxt in prev or (i < HEAD_SEGMENTS and nxt in self._heads)):
                reused += seg.tokens_est
            elif matched:
                matched = False
                reused += self._partial(state, i, chain, seg)
            chains.append(nxt)
            chain = nxt
        for i in range(min(HEAD_SEGMENTS, len(segs))):
            parent = chains[i - 1] if i else ""
            _remember(self._heads, chains[i], 0, self._max_heads)
            _remember(self._head_segs, parent, segs[i], self._max_heads)
        self._sessions[session_id] = _SessionState(chains, segs)
        return reused


PREFIXES = [Prefix("You are a coding agent.\n" * 3, ({"name": "read"},), 30, 12),
            Prefix("You are a reviewer.\n", ({"name": "read"},), 10, 12)]
WORDS = ["alpha beta gamma\n", "def f(x):\n    return x\n", "lorem ipsum\n", "x = 1\n"]

# one step of a session: (kind, word index, estimate given or -1)
steps = st.lists(st.tuples(st.sampled_from(["grow", "reply", "compact", "restart",
                                            "reestimate", "same"]),
                           st.integers(0, len(WORDS) - 1), st.integers(-1, 40)),
                 min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), steps), min_size=1,
                max_size=4), st.integers(2, 64))
def test_the_walk_from_the_first_difference_counts_what_the_full_walk_counts(
        sessions: list[tuple[int, int, list[tuple[str, int, int]]]], max_heads: int) -> None:
    new, old = PrefixTracker(max_heads), OracleTracker(max_heads)
    histories: dict[int, tuple[Message, ...]] = {}
    heads: dict[int, int] = {}
    for sid, head, plan in sessions:
        heads.setdefault(sid, head)
        msgs = histories.get(sid, ())
        for kind, w, est in plan:
            text = WORDS[w] * (1 + w)
            if kind == "grow" or not msgs:
                msgs = (*msgs, Message("user", (TextBlock(text, est),)))
            elif kind == "reply":
                reply = Message("assistant", (TextBlock(text),))
                new.extend(f"s{sid}", reply)
                old.extend(f"s{sid}", reply)
                msgs = (*msgs, Message("assistant", (TextBlock(text),)),
                        Message("user", (TextBlock(WORDS[0]),)))
            elif kind == "compact":
                msgs = (*msgs[:max(1, len(msgs) // 2)], Message("user", (TextBlock(text),)))
            elif kind == "restart":
                heads[sid] = 1 - heads[sid]
                msgs = (Message("user", (TextBlock(text),)),)
            elif kind == "reestimate":           # the same text, another estimate given
                last = msgs[-1]
                block = last.blocks[0]
                assert isinstance(block, TextBlock)
                msgs = (*msgs[:-1], Message(last.role, (TextBlock(block.text, est),)))
            prefix = PREFIXES[heads[sid]]
            got = new.observe(f"s{sid}", prefix, msgs, "tools")
            want = old.observe(f"s{sid}", prefix, msgs, "tools")
            assert got == want, (kind, len(msgs))
        histories[sid] = msgs
