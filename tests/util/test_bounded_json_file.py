"""`bounded.json_file`: every file of a run folder read one way, bounded (issue 57 item 4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.util.bounded import RUN_FILE_DEPTH, json_file


@pytest.mark.parametrize(("text", "needle"), [
    ('{"a": ' + "9" * 5000 + "}", "more than 4300 digits"),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than"),
    ('{"a": ' + "[" * (RUN_FILE_DEPTH + 1) + "]" * (RUN_FILE_DEPTH + 1) + "}",
     f"nested deeper than {RUN_FILE_DEPTH} levels"),
    ('{"a": 1, "a": 2}', "given twice"),
    ('{"a": 1', "corrupted JSON"),
    ("\udcff", "not UTF-8"),
])
def test_hostile_json_is_one_line_naming_the_file(tmp_path: Path, text: str,
                                                  needle: str) -> None:
    f = tmp_path / "summary.json"
    f.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(InputError) as info:
        json_file(f, what="summary")
    msg = str(info.value)
    assert msg.startswith(str(f)) and needle in msg and "\n" not in msg and len(msg) < 300


def test_what_we_write_reads_back(tmp_path: Path) -> None:
    f = tmp_path / "summary.json"
    f.write_text('{"x": NaN, "y": Infinity, "z": [[{"k": 1}]], "n": 12345678901234567890}')
    d = json_file(f)
    assert d["z"] == [[{"k": 1}]] and d["n"] == 12345678901234567890 and d["x"] != d["x"]


def test_no_regular_file_or_too_big_is_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "manifest.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        json_file(fifo, what="manifest")      # would block forever if opened
    big = tmp_path / "size.json"
    big.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(InputError, match="more than 1,000 bytes"):
        json_file(big, max_bytes=1000)
    with pytest.raises(InputError, match="missing"):
        json_file(tmp_path / "missing.json")
