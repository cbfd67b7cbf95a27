"""`run` reads its own turns back only for a team replay (the console's fidelity text);
any other run finishes without reading the parquet it has just written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from tests.conftest import SCENARIOS


def test_a_plain_run_does_not_read_its_turns_back(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = pd.read_parquet

    def recording(path: Any, *args: Any, **kwargs: Any) -> pd.DataFrame:
        read.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_parquet", recording)
    res = CliRunner().invoke(main, ["run", str(SCENARIOS / "claude-code-team.yaml"),
                                    "--sessions", "2", "--turns", "2",
                                    "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.output.strip().splitlines()[-1])
    assert (run_dir / "turns.parquet").is_file()
    assert not [p for p in read if p.endswith("turns.parquet")], read
