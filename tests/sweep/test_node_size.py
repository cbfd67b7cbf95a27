"""`size --node`: a node's TP layouts, each replica searched, side by side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.errors import InputError
from simulator.sweep import api
from simulator.sweep.card_size import SizeProfile
from simulator.sweep.fanout import Serial
from simulator.sweep.node_size import (
    NodeLayoutTable,
    Together,
    candidate_tps,
    format_node_layout,
    layouts,
    node_profile,
    parse_node,
    tp_dim,
)
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult, Target
from simulator.sweep.profiles import PointBase
from simulator.sweep.step_ramp import goodput_overrides
from simulator.sweep.tiers import EachValue
from tests.conftest import SCENARIOS
from tests.sweep.toy import BASE, Wide, toy_server


def test_a_node_is_gpus_by_card() -> None:
    assert parse_node("8xh100") == parse_node(" 8×h100 ")
    assert str(parse_node("8xh100")) == "8xh100"
    for bad in ("h100", "0xh100", "8x", "999xh100"):
        with pytest.raises(InputError, match="GPUS x CARD"):
            parse_node(bad)
    with pytest.raises(InputError, match="unknown hardware"):
        parse_node("8xnosuchcard")
    assert candidate_tps(8) == [1, 2, 4, 8]
    assert candidate_tps(6) == [1, 2]


def test_layouts_that_do_not_fit_are_listed_with_vllms_refusal() -> None:
    fits = layouts(parse_node("8xh100"), "llama-3.1-70b", {}, False)
    assert fits.fitting == (2, 4, 8)
    (tp, why), = fits.refused
    assert tp == 1 and "GB short" in why
    kv = dict(fits.kv_tokens)
    assert kv[2] < kv[4] < kv[8]              # wider replicas: more room for KV each
    with pytest.raises(InputError, match="fits no layout"):
        layouts(parse_node("1xl40s"), "llama-3.1-70b", {}, False)


def _by_tp(p: Point) -> PointResult:
    """A toy replica whose knee grows with its TP degree (a TP N replica holds more)."""
    tp = next(int(o.split("=")[1]) for o in p.overrides if o.startswith("twin.tp="))
    n = p.coords["requested_sessions"]
    return PointResult(p, f"{p.out_dir}/run-{n}", "completed", "",
                       RunSummary.from_json(toy_server(n, knee=6 * tp)), 0.0, 0.0)


def test_the_node_table_multiplies_each_replica_out_and_names_the_best() -> None:
    node = parse_node("8xh100")
    slos = (parse_slo("window_per_session_tok_s>=50"),)
    fits = layouts(node, "gpt-oss-120b", {}, False)
    assert fits.fitting == (1, 2, 4, 8)
    profile = EachValue(BASE, tp_dim(node, (1, 2, 4), False),
                        lambda b, _t: SizeProfile(b, slos, 256, 0, team_sessions=100))
    answers = run_profile(profile, Wide(2), runner=_by_tp)
    # 100 / (1 + n / knee) >= 50 up to n = knee = 6 × TP: 6, 12, 24 per replica
    assert [(tp, r.sessions) for tp, r in answers] == [(1, 6), (2, 12), (4, 24)]
    for tp, r in answers:
        assert all(f"/tp-{tp}/" in p.run_dir for p in r.probes)
    table = NodeLayoutTable(node, "gpt-oss-120b", 2.49, 100, False, fits, answers)
    rows = table.rows()
    assert [(r.replicas, r.node_sessions) for r in rows] == [(8, 48), (4, 48), (2, 48)]
    assert all(r.usd_per_hour == pytest.approx(8 * 2.49) for r in rows)
    assert [r.team_replicas for r in rows] == [17, 9, 5]
    assert [r.team_nodes for r in rows] == [3, 3, 3]
    best = table.best()
    assert best is not None and best.tp == 1       # a tie goes to the narrower layout
    text = format_node_layout(table)
    assert "8 × TP1" in text and "2 × TP4" in text and "answer: 8 × TP1 holds 48" in text
    assert table.to_dict()["best"] == best.to_dict()


def test_ep_is_off_at_tp1_and_on_past_it() -> None:
    dim = tp_dim(parse_node("8xh100"), (1, 2), True)
    assert dim.overrides(1) == ("twin.tp=1", "twin.ep=false")
    assert dim.overrides(2) == ("twin.tp=2", "twin.ep=true")


def _by_tp_and_seed(p: Point) -> PointResult:
    """A toy replica whose knee grows with its TP degree and moves with the seed (a
    repeat passes further up on odd seeds, fails at the answer on seed + 2)."""
    tp = next(int(o.split("=")[1]) for o in p.overrides if o.startswith("twin.tp="))
    n, k = p.coords["requested_sessions"], p.coords.get("seed_offset", 0)
    knee = 6 * tp + (3 if k % 2 else -2 * (k > 0))
    return PointResult(p, f"{p.out_dir}/run-{n}-{k}", "completed", "",
                       RunSummary.from_json(toy_server(n, knee=knee)), 0.0, 0.0)


@pytest.mark.parametrize("width", [1, 3, 8])
def test_the_layouts_side_by_side_answer_as_one_after_another(width: int) -> None:
    """`Together` interleaves the searches' probes; each search sees its own results, so
    each layout's answer, probes and run folders are those of the searches run in turn."""
    node = parse_node("8xh100")
    slos = (parse_slo("window_per_session_tok_s>=50"),)
    dim = tp_dim(node, (1, 2, 4, 8), False)

    def search(b: PointBase, _t: int) -> SizeProfile:
        return SizeProfile(b, slos, 256, 2, team_sessions=100)
    serial = run_profile(EachValue(BASE, dim, search), Wide(1), runner=_by_tp_and_seed)
    batches: list[int] = []

    def runner(p: Point) -> PointResult:
        batches.append(p.coords["requested_sessions"])
        return _by_tp_and_seed(p)
    side = run_profile(Together(BASE, dim, search), Wide(width), runner=runner)
    assert [tp for tp, _ in side] == [1, 2, 4, 8]
    for (tp, a), (tp_s, b) in zip(side, serial, strict=True):
        assert tp == tp_s and a.sessions == b.sessions and a.answers == b.answers
        assert [(p.sessions, p.seed_offset, p.run_dir) for p in a.probes] == \
            [(p.sessions, p.seed_offset, p.run_dir) for p in b.probes]
    if width == 1:           # one at a time: the same runs in the same order (in turn)
        assert batches == [p.sessions for _, r in serial for p in r.probes]


def test_node_repeats_check_the_answer_and_walk_down_only() -> None:
    """`repeat_up=False` (`node_profile`): the headline (the least over the seeds) is the
    one the galloping repeat gives, without the runs above the answer."""
    node = parse_node("8xh100")
    slos = (parse_slo("window_per_session_tok_s>=50"),)
    fits = layouts(node, "gpt-oss-120b", {}, False)

    def search(up: bool) -> Callable[[PointBase, int], SizeProfile]:
        def make(b: PointBase, _t: int) -> SizeProfile:
            return SizeProfile(b, slos, 256, 2, team_sessions=100, repeat_up=up)
        return make
    dim = tp_dim(node, fits.fitting, False)
    up = run_profile(EachValue(BASE, dim, search(True)), Wide(1), runner=_by_tp_and_seed)
    team = PointBase(str(SCENARIOS / "claude-code-team.yaml"), (), BASE.folder, 7,
                     Target(twin="h100/gpt-oss-120b"))    # its KV facts are read
    down = run_profile(node_profile(team, node, fits, False, slos, 256, 2, 100), Wide(1),
                       runner=_by_tp_and_seed)
    for (_, a), (_, b) in zip(up, down, strict=True):
        assert a.sessions == b.sessions and a.confirmed == b.confirmed
        first = a.answers[0]
        assert b.answers[0] == first and max(b.answers) == first < max(a.answers)
        assert all(p.sessions <= first for p in b.probes if p.seed_offset > 0)
        assert sum(p.sessions for p in b.probes) < sum(p.sessions for p in a.probes)


@pytest.mark.slow
def test_size_node_on_the_twin_answers_as_the_searches_one_after_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's searches (side by side, repeats walking down only, the passes' trend)
    against the searches as `size --node` ran them before: one after another, repeats
    galloping up, a bisection where the failing probe has no figures — on the twin, a
    small node and short runs. Each layout's headline and first-seed answer agree."""
    slo = "per_session_tok_s>=30"
    team = str(SCENARIOS / "claude-code-team.yaml")
    twin, over = "h100/gpt-oss-120b", ["turns=3"]
    monkeypatch.chdir(tmp_path)                 # the call's runs go to ./results/size-…
    table = api.node(team, [slo], "2xh100", max_sessions=12, repeats=1, twin=twin,
                     overrides=over)
    base = api.search_base(team, over, target=Target(twin=twin), out=tmp_path)
    base = replace(base, overrides=(*base.overrides, *goodput_overrides(
        base, (parse_slo(slo),), ())))
    node = parse_node("2xh100")
    old = run_profile(EachValue(base, tp_dim(node, (1, 2), False), lambda b, _t: SizeProfile.of(
        b, (parse_slo(slo),), 12, 1)), Serial())
    assert [tp for tp, _ in table.answers] == [tp for tp, _ in old] == [1, 2]
    for (_, new), (_, was) in zip(table.answers, old, strict=True):
        assert new.sessions == was.sessions > 0 and new.answers[0] == was.answers[0]
