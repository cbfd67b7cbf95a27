"""The twin of this machine against vLLM CPU serving SmolLM2-135M-Instruct: fitted on one
session of the real server through `endurance run`'s path, then predicting 4 sessions
and n-gram speculation on vs off without refitting (`simulator/engines/twin_check.py`).

The bands are the check: wide enough for a busy shared 2-core box (the figures moved by
the amounts noted beside each band between runs here), tight enough that a twin off by
2x in speed fails. What was measured is printed (pytest -s, or on failure).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simulator.engines import twin_check as tc
from simulator.engines.server import EngineServer
from simulator.twin.model.profile_write import yaml_text

# two vLLM CPU servers (plain and n-gram), ~15 min here: a campaign (`pytest -m campaign`)
pytestmark = [pytest.mark.real_engine, pytest.mark.campaign, pytest.mark.timeout(1800)]

# twin ÷ real must lie in [1/BAND, BAND]. Measured here (2026-12-01, load 3-10 on the
# shared 2 cores), twin errors at 4 sessions in this test / two benchmark runs: decode
# +1% / -1%, -4%; TTFT p50 -12% / -3%, +18%; speedup +17% / +31%, +7%; cache share
# +0.1 / 0.0, 0.0 points. The real figures themselves moved between runs by ~30%
# (4-session decode 9.2-11.9 tok/s, batch-1 decode medians 16-21 tok/s over five fit
# runs, turn TTFTs 0.17-1.5 s within one run)
DECODE_BAND = 1.7      # decode tok/s per session
TTFT_BAND = 1.9        # TTFT p50 (the noisiest: one prefill per turn)
SPEEDUP_BAND = 1.6     # speculation on ÷ off (the twin's CPU spec terms are unmeasured)
SHARE_POINTS = 10.0    # cache-read share, percentage points
# speculation at 2, 4 and 8 streams: the measured run-to-run spread (issue 48,
# `twin_vs_vllm_cpu.py --spec-only --repeats 2`, 2026-12-03, load 9-14): the one-stream
# fit point moved ×1.20 between repeats and the predicted points ×1.07-1.23, so a
# prediction carries up to ×1.20 × 1.23 ≈ 1.48
SPEC_STREAM_BAND = 1.5
SESSIONS = 4
TURNS = 4


def _within(row: tc.Row, band: float) -> bool:
    assert row.twin and row.real, row
    return 1 / band <= row.twin / row.real <= band


def test_twin_fitted_at_one_session_predicts_four_and_speculation(
        smol_vllm: EngineServer, smol_vllm_spec: EngineServer, tmp_path: Path) -> None:
    tc.warm_up(smol_vllm)        # a fresh server's first request is not a fit point
    tc.warm_up(smol_vllm_spec)
    one = tc.run(tc.SCENARIO, tmp_path / "fit", sessions=1, seed=301, turns=TURNS,
                     endpoint=smol_vllm.base_url)
    fit, pts = tc.fit_run(one)
    profile = tmp_path / f"{tc.FITTED_NAME}.yaml"
    profile.write_text(yaml_text(tc.fitted_profile(fit, pts, when="test", conditions="pytest")))
    assert fit.rms_log_error < 0.5, [(r.obs.label, r.predicted, r.obs.measured) for r in fit.rows]

    real = tc.run(tc.SCENARIO, tmp_path / "real", sessions=SESSIONS, seed=302, turns=TURNS,
                  endpoint=smol_vllm.base_url)
    twin = tc.run(tc.SCENARIO, tmp_path / "twin", sessions=SESSIONS, seed=302, turns=TURNS,
                  twin=f"{profile}/{tc.MODEL}")
    rows = tc.session_rows(SESSIONS, twin, real)
    rows += tc.spec_rows(smol_vllm, smol_vllm_spec, str(profile), max_tokens=120)
    checked = tc.spec_check(smol_vllm, smol_vllm_spec,
                            tc.fitted_profile(fit, pts, when="test", conditions="pytest"),
                            tmp_path / "spec", max_tokens=120)
    rows += checked.rows
    print("\n" + tc.markdown([*tc.fit_rows(fit), *rows]), file=sys.stderr)
    by = {r.quantity: r for r in rows}
    assert _within(by["decode tok/s per session (median request)"], DECODE_BAND)
    assert _within(by["TTFT p50"], TTFT_BAND)
    share = by["cache-read share (shared prefix)"]
    assert share.error is not None and abs(share.error) <= SHARE_POINTS
    assert _within(by["speedup, on ÷ off"], SPEEDUP_BAND)
    # speculation fitted on one stream (spec_step_s), 2, 4 and 8 streams predicted
    streams = [r for r in checked.rows if "streams" in r.setting]
    assert [r.setting.split()[0] for r in streams] == ["2", "4", "8"]
    for r in streams:
        assert _within(r, SPEC_STREAM_BAND), r
