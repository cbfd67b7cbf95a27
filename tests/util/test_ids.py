from __future__ import annotations

from simulator.util.ids import session_id


def test_session_id_is_zero_padded_to_four_digits() -> None:
    assert [session_id(i) for i in (0, 7, 123, 9999, 12345)] == [
        "s0000", "s0007", "s0123", "s9999", "s12345"]
