"""The rows a run is made of are typed from the recorder to the live view (issue 60):
no `dict[str, Any]` in `records/`, `live/` and `endpoints/base.py`. A journal row read
back is `util.jsontypes.JSONObject` (each value narrowed where it is read), a /metrics
window row `records.prometheus.MetricsRow`, a reply's extras `endpoints.base.ReplyExtra`,
what an endpoint describes `JSONObject`.

`MAX_ANY` holds how many lines of each of those places name `Any` today (the
`grep -rwn Any` of issue 60's count); lower it when one goes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator.endpoints.base import ReplyExtra
from simulator.records.rows import COLUMNS

SIMULATOR = Path(__file__).resolve().parents[1] / "simulator"
TYPED = ("records", "live", "endpoints/base.py")
MAX_ANY = {"records": 2, "live": 0, "endpoints/base.py": 0}   # records: TurnRecord.from_row


def _files(place: str) -> list[Path]:
    path = SIMULATOR / place
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


def _lines(place: str, pattern: str) -> list[str]:
    """`file:line: text` of every line of `place` that `pattern` matches."""
    return [f"{p.relative_to(SIMULATOR)}:{i}: {line.strip()}" for p in _files(place)
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(pattern, line)]


@pytest.mark.parametrize("place", TYPED)
def test_no_untyped_row_dict(place: str) -> None:
    found = _lines(place, r"dict\[str,\s*Any\]")
    assert not found, "a row typed `dict[str, Any]`:\n" + "\n".join(found)


@pytest.mark.parametrize("place", TYPED)
def test_the_anys_do_not_grow(place: str) -> None:
    found = _lines(place, r"\bAny\b")
    assert len(found) <= MAX_ANY[place], f"more lines naming Any in {place}:\n" + "\n".join(found)


def test_reply_extra_names_the_row_columns_it_feeds() -> None:
    """The turn row's columns read from a reply's extras are keys of `ReplyExtra`, so
    mypy checks their readers (`session/agent.py`, `records/rows.py`)."""
    fed = {"queue_s", "replica", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
           "ngram_ref_passes", "ngram_ref_tokens", "prefill_where", "kv_transfer_bytes",
           "kv_transfer_wait_s"}
    assert fed <= set(COLUMNS)
    assert fed <= set(ReplyExtra.__annotations__)
