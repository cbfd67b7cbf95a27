"""The summary's per-session figures on numpy slices give exactly (bit for bit) what
the per-session pandas loops they replaced gave: same rows, same order, same sums."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.summary import per_session_sustained, sustained_tok_s, thirds


def _per_session_loop(ok: pd.DataFrame) -> pd.Series:
    out = {sid: sustained_tok_s(g) for sid, g in ok.groupby("session_id", sort=True)}
    return pd.Series({k: v for k, v in out.items() if v is not None}, dtype=float)


def _thirds_loop(turn_ok: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    firsts, lasts = [], []
    for _, g in turn_ok.groupby("session_id", sort=True):
        g = g.sort_values("turn_index")
        k = len(g) // 3
        if k >= 1:
            firsts.append(g.iloc[:k])
            lasts.append(g.iloc[-k:])
    if not firsts:
        empty = turn_ok.iloc[0:0]
        return empty, empty
    return pd.concat(firsts), pd.concat(lasts)


def _table(seed: int, sessions: int, rows: int, nan_share: float) -> pd.DataFrame:
    """Rows in arrival order (sessions interleaved), floats with awkward mantissas."""
    rng = random.Random(seed)
    turns = {f"s{i:04d}": 0 for i in range(sessions)}
    data = []
    for _ in range(rows):
        sid = rng.choice(list(turns))
        turns[sid] += 1
        data.append({"session_id": sid, "turn_index": turns[sid] - 1,
                     "output_tokens": None if rng.random() < nan_share else rng.randint(1, 4000),
                     "e2e_s": None if rng.random() < nan_share else rng.random() * 1e3 / 7})
    df = pd.DataFrame(data, columns=["session_id", "turn_index", "output_tokens", "e2e_s"])
    df["output_tokens"] = df["output_tokens"].astype("Int64")
    return df.sample(frac=1.0, random_state=seed)       # any row order, labels kept


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 40), st.integers(0, 400),
       st.sampled_from([0.0, 0.05, 0.5]))
def test_per_session_sustained_is_the_loop(seed: int, sessions: int, rows: int,
                                           nan_share: float) -> None:
    df = _table(seed, sessions, rows, nan_share)
    fast, loop = per_session_sustained(df), _per_session_loop(df)
    assert fast.index.tolist() == loop.index.tolist()
    assert np.array_equal(fast.to_numpy(), loop.to_numpy())      # bit for bit
    if len(loop):
        assert fast.mean() == loop.mean()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 40), st.integers(0, 400))
def test_thirds_are_the_loop(seed: int, sessions: int, rows: int) -> None:
    df = _table(seed, sessions, rows, 0.05)
    for fast, loop in zip(thirds(df), _thirds_loop(df), strict=True):
        pd.testing.assert_frame_equal(fast, loop, check_exact=True)
        assert sustained_tok_s(fast) == sustained_tok_s(loop)


def test_empty_tables() -> None:
    df = _table(1, 3, 0, 0.0)
    assert per_session_sustained(df).empty
    first, last = thirds(df)
    assert first.empty and last.empty
