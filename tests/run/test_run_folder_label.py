"""`run --label block` writes a folder whose name carries the label (issue 57 item 9): the
README's `results/<block-run>` is that folder, not a guess."""

from __future__ import annotations

import re
from pathlib import Path

from simulator.run.execute import execute
from simulator.run.manifest import new_run_id
from simulator.run.spec import RunSpec
from tests.conftest import small_scenario
from tests.reliability_twin import write_yaml


def test_a_labelled_run_folder_carries_the_label(tmp_path: Path) -> None:
    scen = write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))
    res = execute(RunSpec(str(scen), out_dir=tmp_path / "r", show_progress=False,
                          label="block"), echo=lambda s: None)
    assert re.fullmatch(r"\d{8}-\d{6}-small-block-[0-9a-f]{4}", res.run_dir.name), \
        res.run_dir.name


def test_any_label_makes_a_safe_folder_name() -> None:
    for label, tag in [("block", "-block-"), ("a/../b c", "-a-..-b-c-"),
                       ("\n# x\u202e<script>", "-x-script-"), ("x" * 300, "-" + "x" * 40 + "-")]:
        rid = new_run_id("small", label)
        assert tag in rid and "/" not in rid and re.fullmatch(r"[A-Za-z0-9_.-]+", rid), rid
    assert re.fullmatch(r"\d{8}-\d{6}-small-[0-9a-f]{4}", new_run_id("small", "///"))
    assert re.fullmatch(r"\d{8}-\d{6}-small-[0-9a-f]{4}", new_run_id("small"))
