"""Issue 57 item 5 (hostile round five): an OTLP protobuf file that never ends — a 1 GB
sparse file is 268 million zero length prefixes, each an empty message — is refused at
once, naming the file and the message, not read to its end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main


@pytest.mark.parametrize("fmt", ["claude-code-otel", "otel-genai"])
def test_a_sparse_gigabyte_is_refused_quickly(tmp_path: Path, fmt: str) -> None:
    p = tmp_path / "sparse.bin"
    with p.open("wb") as fh:
        fh.truncate(1 << 30)                  # 1 GB of zeros, no disk used
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["import", fmt, str(p), "-o", str(tmp_path / "o.yaml")])
    secs = time.monotonic() - t0
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert str(p) in lines[0] and "empty messages" in lines[0], lines[0]
    assert secs < 10, f"{secs:.1f} s"
    assert not (tmp_path / "o.yaml").exists()
