"""Goodput against a hand-computed example: which requests met the per-request SLO,
the share, the rates over the run and inside a window."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from simulator.analysis.goodput import GoodputSlo, goodput_figures, meets
from simulator.analysis.summary import summarize
from simulator.records.rows import COLUMNS


def _row(sid: str, t: int, *, ttft: float | None, decode: float | None, out: int,
         ok: bool = True, error: str | None = None, kind: str = "turn",
         sent: float = 0.0, e2e: float = 4.0) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(run_id="r", session_id=sid, turn_index=t, request_kind=kind, attempt=1,
               started_at=0.0, started_mono_s=sent, context_tokens_est=1000,
               reusable_prefix_tokens=0, max_tokens=512, turn_kind="edit", think_time_s=0.0,
               output_tokens=out, ttft_s=ttft, decode_tok_s=decode, e2e_s=e2e,
               turn_tok_s=None if not out else out / e2e, ok=ok, error_type=error,
               compaction_messages_removed=0, compaction_tokens_removed=0)
    return row


# Hand-computed: SLO TTFT ≤ 15 s and ≥ 30 tok/s.
#   a: TTFT 1 s, 50 tok/s, 100 tokens       → met
#   b: TTFT 20 s                             → missed (TTFT)
#   c: TTFT 2 s, 10 tok/s                    → missed (speed)
#   d: TTFT 3 s, 1 token (no decode speed)   → met
#   e: failed (timeout)                      → missed
#   f: cancelled at stop, g: a summary       → not judged
# share 2/5 = 0.4; over a 10 s run: 0.2 met requests/s, (100 + 1) / 10 = 10.1 tok/s
ROWS = [
    _row("s0", 0, ttft=1.0, decode=50.0, out=100, sent=0.0),
    _row("s0", 1, ttft=20.0, decode=60.0, out=100, sent=0.0, e2e=10.0),
    _row("s1", 0, ttft=2.0, decode=10.0, out=100, sent=0.0),
    _row("s1", 1, ttft=3.0, decode=None, out=1, sent=4.0, e2e=3.0),
    _row("s1", 2, ttft=None, decode=None, out=0, ok=False, error="timeout", sent=7.0, e2e=2.0),
    _row("s1", 3, ttft=None, decode=None, out=0, ok=False, error="cancelled", sent=9.0),
    _row("s0", 2, ttft=1.0, decode=80.0, out=50, kind="summary", sent=5.0),
]


def test_goodput_by_hand() -> None:
    turns = pd.DataFrame(ROWS, columns=list(COLUMNS))
    slo = GoodputSlo(ttft_s=15.0, output_tok_s=30.0)
    judged = turns[(turns["request_kind"] == "turn") & (turns["error_type"] != "cancelled")]
    assert list(meets(judged, slo)) == [True, False, False, True, False]
    g = goodput_figures(turns, slo, 10.0, (0.0, 10.0), 2)
    assert g["goodput_share"] == pytest.approx(0.4)
    assert g["goodput_requests_per_s"] == pytest.approx(0.2)
    assert g["goodput_tok_s"] == pytest.approx(10.1)
    # inside [0, 10]: a's and d's 101 tokens all fall in it; the requests with a first
    # token (or a failure) in it are a (1 s), c (2 s), d (7 s) and e (fails at 9 s) —
    # b's first token comes at 20 s → 2 of 4
    assert g["window_goodput_tok_s"] == pytest.approx(10.1)
    assert g["window_goodput_per_session_tok_s"] == pytest.approx(5.05)
    assert g["window_goodput_share"] == pytest.approx(0.5)
    # a window that ends before d's first token: a and c → 1 of 2; a's 100 tokens over
    # its decode 1 → 4 s all fall in it (1 at its first token, 99 spread), 25 tok/s
    early = goodput_figures(turns, slo, 10.0, (0.0, 4.0), 2)
    assert early["window_goodput_share"] == pytest.approx(0.5)
    assert early["window_goodput_tok_s"] == pytest.approx(25.0)
    # the SLO is a setting: with ≥ 5 tok/s, c meets it too
    assert goodput_figures(turns, GoodputSlo(15.0, 5.0), 10.0, None, 2)["goodput_share"] \
        == pytest.approx(0.6)


def test_the_summary_carries_goodput_and_its_slo() -> None:
    turns = pd.DataFrame(ROWS, columns=list(COLUMNS))
    s = summarize(turns, price_per_hour=None, simulated=True, wall_window_s=10.0,
                  goodput=GoodputSlo(15.0, 30.0))
    assert s["goodput_share"] == pytest.approx(0.4) and s["goodput_tok_s"] == pytest.approx(10.1)
    assert s["goodput_slo"] == {"ttft_s": 15.0, "output_tok_s": 30.0}
    assert "window_goodput_share" not in s        # no steady config: no window keys
