"""Fit points from turn rows (`twin/model/fit_points.py`), on synthetic rows: which rows give
which observation, in which token units, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.errors import InputError
from simulator.twin.model.fit import fit_terms
from simulator.twin.model.fit_points import IDENTIFIED, points_document, points_from_rows
from simulator.twin.model.profile_write import fitted_hardware


def row(turn: int, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"session_id": "s0", "turn_index": turn, "request_kind": "turn",
                            "ok": True, "context_tokens_est": 1000, "prompt_tokens": 1300,
                            "cache_read_tokens": 650, "output_tokens": 40, "ttft_s": 0.5,
                            "decode_tok_s": 20.0}
    return base | kw


def test_each_ok_turn_gives_a_prefill_and_a_decode_point_in_twin_units() -> None:
    res = points_from_rows([row(0), row(1, ttft_s=0.25)])
    kinds = [(p.kind, p.label) for p in res.points]
    assert kinds == [("prefill", "turn 0 TTFT"), ("decode", "turn 0 decode"),
                     ("prefill", "turn 1 TTFT"), ("decode", "turn 1 decode")]
    pre, dec = res.points[0], res.points[1]
    # twin units: the client's estimate, with the server's cached share of it
    assert (pre.prompt_tokens, pre.cached_tokens, pre.measured, pre.unit) == (1000, 500, 0.5, "s")
    assert (dec.batch, dec.measured, dec.unit) == (1, 20.0, "tok_s")
    assert dec.context == 1000 + round(40 * 1000 / 1300 / 2)
    assert res.token_ratio == pytest.approx(1.3)


def test_server_units_keep_the_servers_counts() -> None:
    pre, dec = points_from_rows([row(0)], units="server").points
    assert (pre.prompt_tokens, pre.cached_tokens) == (1300, 650)
    assert dec.context == 1300 + 20


def test_unusable_rows_are_skipped_and_counted() -> None:
    rows = [row(0, ok=False), row(1, request_kind="summary"), row(2, prompt_tokens=None),
            row(3, ttft_s=None, output_tokens=3), row(4, decode_tok_s=None), row(5)]
    res = points_from_rows(rows)
    assert [p.label for p in res.points] == ["turn 4 TTFT", "turn 5 TTFT", "turn 5 decode"]
    assert res.skipped == 2          # turn 2 (no server count), turn 3 (nothing to time)


def test_a_fully_cached_prompt_still_has_one_token_to_compute() -> None:
    (pre, _) = points_from_rows([row(0, cache_read_tokens=1300)]).points
    assert pre.cached_tokens == pre.prompt_tokens - 1


@pytest.mark.parametrize("rows, message", [
    ([row(0), row(0, session_id="s1")], "2 sessions"),
    ([row(0, ok=False)], "no ok turns"),
])
def test_refused(rows: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InputError, match=message):
        points_from_rows(rows)


def test_the_points_fit_back_the_terms_that_made_them() -> None:
    """Points the twin's own model produced (eta_w, eta_c changed) are fitted back to
    those values from the batch-1 rows alone."""
    from simulator.twin.model.perf_model import build_perf_model, decode_tok_s, prefill_seconds
    true = build_perf_model("cpu-2core", "smollm2-135m", overrides={"eta_w": 0.3, "eta_c": 0.4})
    rows = [row(i, context_tokens_est=p, prompt_tokens=p, cache_read_tokens=c,
                ttft_s=prefill_seconds(true, p, c), decode_tok_s=decode_tok_s(true, 1, p + 20))
            for i, (p, c) in enumerate([(400, 0), (800, 384), (1200, 768), (1500, 1408)])]
    res = points_from_rows(rows)
    doc = points_document(res, hardware="cpu-2core", model="smollm2-135m", source="synthetic")
    assert doc["fit"] == list(IDENTIFIED) and len(doc["points"]) == 8
    fit = fit_terms(res.points, "cpu-2core", "smollm2-135m", free=("eta_w", "eta_c"))
    assert fit.terms["eta_w"] == pytest.approx(0.3, rel=0.02)
    assert fit.terms["eta_c"] == pytest.approx(0.4, rel=0.02)
    assert fit.rms_log_error < 0.01
    from simulator.twin.model.profiles import load_hardware
    prof = fitted_hardware(load_hardware("cpu-2core").model_dump(exclude_none=True),
                           fit.terms, fit.free, name="cpu-2core-x", source="synthetic rows")
    assert prof["efficiency"]["eta_w"] == pytest.approx(0.3, rel=0.02)
    assert "fitted: eta_w, eta_c" in prof["efficiency"]["source"]
