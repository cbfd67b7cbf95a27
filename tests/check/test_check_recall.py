"""`endurance check URL --recall`: haystacks, planted facts, matching, the table."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from simulator.check.needle import (
    BEYOND,
    ERROR,
    HIT,
    MISS,
    QUESTION,
    Outcome,
    build_case,
    cells,
    code_word,
    length_label,
    parse_depths,
    parse_lengths,
    recalled,
)
from simulator.check.recall import run_recall_async
from simulator.cli import main
from simulator.errors import InputError
from simulator.twin.serve.server import serving, twin_app
from simulator.util import tokens


@pytest.mark.parametrize(("text", "want"), [("4k", (4096,)), ("0.5k, 3000,4k,4K", (512, 3000, 4096)),
                                            ("1m", (1 << 20,))])
def test_lengths_parse(text: str, want: tuple[int, ...]) -> None:
    assert parse_lengths(text) == want


@pytest.mark.parametrize("bad", ["", "4q", "-4k", "100", "2m", ",,"])
def test_bad_lengths_are_one_clear_error(bad: str) -> None:
    with pytest.raises(InputError, match="--lengths"):
        parse_lengths(bad)


def test_depths_parse_and_refuse_outside_0_1() -> None:
    assert parse_depths("0.1,0.5,0.9,0.5") == (0.1, 0.5, 0.9)
    for bad in ("1.5", "x", ""):
        with pytest.raises(InputError, match="--depths"):
            parse_depths(bad)


@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_the_fact_sits_at_its_depth_of_a_haystack_of_the_asked_size(depth: float) -> None:
    case = build_case(4096, depth, 0)
    assert abs(case.tokens_est - 4096) < 4096 * 0.03
    assert case.prompt.endswith(QUESTION) and case.prompt.count(case.expected) == 1
    at = tokens.count(case.prompt[:case.prompt.index("DEPLOY_CODE_WORD")])
    assert abs(at / case.tokens_est - depth) < 0.05
    # agent-like content: commands and their output, code among them
    assert "$ cat src/" in case.prompt and "def " in case.prompt


def test_cases_are_seeded_and_distinct_per_cell_and_repeat() -> None:
    a, again = build_case(2048, 0.5, 0), build_case(2048, 0.5, 0)
    assert a == again
    others = [build_case(2048, 0.5, 1), build_case(2048, 0.1, 0), build_case(2048, 0.5, 0, 9)]
    assert all(o.prompt != a.prompt for o in others)
    # one haystack per (length, repeat): at another depth only the fact line moves
    moved = build_case(2048, 0.1, 0)
    assert moved.expected != a.expected
    strip = [c.prompt.replace(f'DEPLOY_CODE_WORD = "{c.expected}"', "") for c in (a, moved)]
    assert sorted(strip[0].splitlines()) == sorted(strip[1].splitlines())
    words = {code_word(random.Random(i)) for i in range(200)}
    assert len(words) > 190   # a fresh word per case: no guessing it


def test_a_reply_is_right_when_it_names_the_code_word() -> None:
    assert recalled('The value is "Cobalt-Heron-4821".', "cobalt-heron-4821")
    assert recalled("cobalt heron 4821", "cobalt-heron-4821")
    assert not recalled("cobalt-heron-4822", "cobalt-heron-4821")
    assert not recalled("", "cobalt-heron-4821") and not recalled("x", "")


def test_cells_count_beyond_and_errors_apart_from_recall() -> None:
    outs = [Outcome(4096, 0.1, HIT), Outcome(4096, 0.1, MISS), Outcome(4096, 0.9, ERROR),
            Outcome(65536, 0.1, BEYOND), Outcome(65536, 0.9, BEYOND)]
    rows = cells(outs, (4096, 65536), (0.1, 0.9))
    assert [c.label() for c in rows[0]] == ["1/2", "error"]
    assert [c.label() for c in rows[1]] == ["beyond limit", "beyond limit"]
    assert rows[0][0].recall == 0.5 and rows[1][0].recall is None
    assert length_label(4096) == "4k" and length_label(512) == "0.5k" \
        and length_label(3000) == "3000"


async def test_the_twin_is_a_target_and_its_window_bounds_the_lengths() -> None:
    app, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", instant=True, context_window=4096)
    async with serving(app) as url:
        report = await run_recall_async(url, (1024, 8192), (0.5,), repeats=2, timeout_s=30)
    assert report.window == 4096 and report.simulated
    by_len = {n: [o.status for o in report.outcomes if o.length == n] for n in (1024, 8192)}
    assert by_len[8192] == [BEYOND, BEYOND]
    assert all(s in (HIT, MISS) for s in by_len[1024])
    assert all(o.server_tokens for o in report.outcomes if o.length == 1024)


def test_cli_refuses_a_bad_grid_with_exit_2() -> None:
    res = CliRunner().invoke(main, ["check", "http://127.0.0.1:9", "--recall",
                                    "--lengths", "4q"])
    assert res.exit_code == 2 and "--lengths" in res.output
