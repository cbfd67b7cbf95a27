"""Texts whose ids are known (synthesised text, the twin's replies) are framed into
prompts without encoding them again: the ids are exactly what encoding the whole
framed text gives (`tokens.encode_pieces`), for any frame around them."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.protocol.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from simulator.records.prefix import _cut, _pieces
from simulator.scenario import content
from simulator.twin.serve import textgen
from simulator.twin.serve.prompt import message_pieces, render_message
from simulator.util import tokens


@pytest.fixture(autouse=True, scope="module")
def _every_text_remembered() -> Iterator[None]:
    """Short texts too (the run skips them: encoding them whole costs less)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokens, "KNOWN_MIN_CHARS", 0)
        yield


FRAMES = st.sampled_from(["", "\n", " ", ":", "<|im_start|>user\n", "<tool_response>\n",
                          "\n</tool_response><|im_end|>\n", "<|im_end|>\n", "x", "  ",
                          "):\n", "\n\n", "<assistant>", "\r\n", "'s"])
KINDS = st.sampled_from(["code", "prose", "grep", "bash"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(KINDS, st.integers(1, 600), st.integers(0, 2**32)), min_size=1,
                max_size=3), st.lists(FRAMES, min_size=4, max_size=4))
def test_framed_synthesised_texts_encode_as_the_whole(texts: list[tuple[str, int, int]],
                                                      frames: list[str]) -> None:
    pieces: list[str] = [frames[0]]
    for j, (kind, n, seed) in enumerate(texts):
        pieces += [content.synth_text(kind, n, random.Random(seed)), frames[(j + 1) % 4]]
    assert tokens.encode_pieces(pieces) == tokens.encode("".join(pieces))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 900), st.booleans(), FRAMES, FRAMES)
def test_framed_twin_replies_encode_as_the_whole(seed: int, n: int, edit: bool, before: str,
                                                 after: str) -> None:
    prompt = tokens.encode(content.synth_text("code", 3000, random.Random(seed)))
    _, ids = textgen.plan_reply(prompt, n, seed=seed, natural_tokens=None, code_edit=edit,
                                repeat_fraction=0.7)
    reply = tokens.decode(ids)
    tokens.remember(reply, ids)
    pieces = [before, reply, after]
    assert tokens.encode_pieces(pieces) == tokens.encode("".join(pieces))


def test_unknown_and_one_line_texts_are_encoded_whole() -> None:
    text = "one line only"
    tokens.remember(text, tokens.encode(text))
    assert tokens.known(text) is None
    copy = "".join(["a\nb\n", "c\nd"])
    assert tokens.encode_pieces(["x", copy, "y"]) == tokens.encode(f"x{copy}y")


def _message(rng: random.Random) -> Message:
    blocks: list[TextBlock | ToolResultBlock | ToolUseBlock] = []
    for _ in range(rng.randint(1, 3)):
        body = content.synth_text(rng.choice(["code", "prose"]), rng.randint(1, 300), rng)
        options: list[TextBlock | ToolResultBlock | ToolUseBlock] = [
            TextBlock(body), ToolResultBlock(f"t{rng.randrange(9)}", body, rng.random() < 0.3,
                                             "read"),
            ToolUseBlock("t1", "Read", '{"file_path":"a.py"}')]
        blocks.append(rng.choice(options))
    return Message(rng.choice(["user", "assistant"]), tuple(blocks))


def test_message_pieces_join_to_the_rendered_and_serialized_message() -> None:
    rng = random.Random(4)
    for _ in range(200):
        m = _message(rng)
        api = m.to_api()
        pieces = message_pieces(api)
        assert "".join(pieces) == render_message(api)
        assert tokens.encode_pieces(pieces) == tokens.encode(render_message(api))
        ser = _pieces(m)
        assert "".join(ser) == m.serialize()
        n = rng.randrange(len(m.serialize()) + 1)
        assert "".join(_cut(ser, n)) == m.serialize()[:n]
        assert tokens.encode_pieces(_cut(ser, n)) == tokens.encode(m.serialize()[:n])


def test_a_blank_last_or_second_line_is_no_boundary() -> None:
    """"\\n   " then "\\n<x>": the newline, the blank line and the next newline are one
    pretoken, so a text ending in a blank line is encoded whole at its end."""
    for text in ("def a():\n    b = 1\n    c = 2\n   ", "x = 1\n   \n    y = 2\nz = 3\n"):
        ids = tokens.encode(text)
        tokens.remember(text, ids)
        for frame in ("\n<tool_call>", "\n\n", " ", "<|im_end|>\n"):
            pieces = ["<|im_start|>assistant\n", text, frame]
            assert tokens.encode_pieces(pieces) == tokens.encode("".join(pieces))


def test_synthesised_cuts_ending_in_indentation_frame_exactly() -> None:
    rng = random.Random(9)
    blank_tails = 0
    for seed in range(400):
        text = content.synth_text("code", rng.randint(20, 400), random.Random(seed))
        blank_tails += not text[text.rfind("\n") + 1:].strip()
        for frame in ("\n", "\n\n<tool_call>", "<|im_end|>\n"):
            pieces = ["<|im_start|>user\n", text, frame]
            assert tokens.encode_pieces(pieces) == tokens.encode("".join(pieces))
    assert blank_tails > 0          # the case that needs the blank-line rule was met


@settings(max_examples=200, deadline=None)
@given(KINDS, st.integers(1, 900), st.integers(0, 2**32), st.data())
def test_a_cut_of_an_encoding_encodes_as_its_text(kind: str, n: int, seed: int,
                                                  data: st.DataObject) -> None:
    """`encode_cut`: a stretch of a text's ids, decoded and followed by a line break,
    has the ids that encoding it gives."""
    ids = tokens.encode(content.synth_text(kind, n, random.Random(seed)))
    start = data.draw(st.integers(0, len(ids)))
    stop = data.draw(st.integers(start, len(ids)))
    after = data.draw(st.sampled_from(["\n", "", " x", "\n\n"]))
    text, cut_ids = tokens.encode_cut(ids, start, stop, after)
    assert text == tokens.decode(ids[start:stop]) + after
    assert cut_ids == tokens.encode(text)


def test_a_cut_with_blank_lines_encodes_as_its_text() -> None:
    text = "def a():\n    b = 1\n\n    \n    c = 2\n  \nx = 3\n    y\n"
    ids = tokens.encode(text)
    for start in range(len(ids)):
        for stop in range(start, len(ids) + 1):
            assert tokens.encode_cut(ids, start, stop, "\n")[1] == \
                tokens.encode(tokens.decode(ids[start:stop]) + "\n")
