"""The reuse tracker's shared-text counts are shared by the trackers of one process
(`prefix._partials`, by the two messages' digests): a count found before is the one a
fresh count gives, and a pair that differs in either message counts its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simulator.protocol.messages import Message, Prefix, TextBlock, ToolUseBlock
from simulator.records import prefix
from simulator.records.prefix import PrefixTracker

PREFIX = Prefix("You are a coding agent.", (), 6, 0)
USER = Message("user", (TextBlock("Please fix the failing test in the parser module."),))


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    prefix._partials.clear()
    yield
    prefix._partials.clear()


def _reply(text: str) -> Message:
    return Message("assistant", (TextBlock(text),))


def _reused(sent_reply: str, history_reply: str) -> int:
    """A fresh tracker's reusable tokens for the turn after a reply the server sent as
    `sent_reply` and the history holds as `history_reply` plus a tool call."""
    t = PrefixTracker()
    t.observe("s", PREFIX, (USER,), "")
    t.extend("s", _reply(sent_reply))
    held = Message("assistant", (TextBlock(history_reply),
                                 ToolUseBlock("toolu_1", "Read", '{"file_path":"a.py"}')))
    return t.observe("s", PREFIX, (USER, held, Message("user", (TextBlock("ok"),))), "")


LONG = "def parse(items):\n    return [int(x) for x in items]\n" * 4
SHORT = "def parse(items):\n    return []\n"
PAIRS = [((LONG, LONG), (SHORT, LONG)),       # the sent reply differs
         ((LONG, LONG), (LONG, SHORT))]       # the history's message differs


def test_each_message_of_the_pair_keys_its_own_count() -> None:
    for first, second in PAIRS:
        prefix._partials.clear()
        expected = _reused(*second)
        prefix._partials.clear()
        assert _reused(*first) != expected
        assert len(prefix._partials) == 1
        assert _reused(*second) == expected          # not the first's count
        assert len(prefix._partials) == 2
        assert _reused(*second) == expected          # a hit: the same count
        assert len(prefix._partials) == 2


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefix, "MAX_PARTIALS", 1)
    _reused(LONG, LONG)
    _reused(SHORT, LONG)
    assert len(prefix._partials) == 1
