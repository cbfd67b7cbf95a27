"""Execute each notebook top to bottom (as CI does) in a temporary working directory.

The notebooks share one temporary results folder (ENDURANCE_RESULTS), so a later
notebook reuses the twin runs an earlier one made, as it would on a user's checkout.
The kernel is `python3`, which jupyter_client resolves to this interpreter's ipykernel.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from simulator import lab as nbh
from simulator.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"

# notebook → (least PNG figures it must show, text its outputs must contain)
EXPECTED: dict[str, tuple[int, tuple[str, ...]]] = {
    "endurance.ipynb": (6, ("SIMULATED twin", "compaction events", "TTFT p50",
                            "in-process twin (SIMULATED): hardware a40")),
    "compaction.ipynb": (1, ("paired prune / block", "ranking by sustained tok/s", "CI",
                             "prune: ", "hardware a40, model qwen3-coder-30b-a3b-awq (awq)")),
    "sizing.ipynb": (4, ("sweep — SIMULATED (twin)", "binding constraint", "KV-capacity bound",
                         "hardware h100", "one call: ")),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


def _outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _text(outputs: list[dict[str, Any]]) -> str:
    parts = [o.get("text", "") for o in outputs]
    parts += [o.get("data", {}).get("text/plain", "") for o in outputs]
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_notebook_runs_top_to_bottom(name: str, workdir: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(nbh.RESULTS_ENV, str(workdir / "results"))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert not _outputs(nb), f"{name} is committed with outputs; regenerate it"
    client = NotebookClient(nb, kernel_name="python3", timeout=240,
                            resources={"metadata": {"path": str(workdir)}})
    t = time.monotonic()
    client.execute()          # raises CellExecutionError on the first failing cell
    print(f"{name}: executed in {time.monotonic() - t:.1f} s")
    nbformat.write(nb, workdir / name)
    outputs = _outputs(nb)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    least, phrases = EXPECTED[name]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) >= least, f"{name}: {len(pngs)} figures, expected ≥ {least}"
    text = _text(outputs)
    for phrase in phrases:
        assert phrase in text, f"{name}: no {phrase!r} in its outputs"
    assert "nan" not in text.split(), f"{name}: a figure printed as nan"
    assert not (ROOT / "notebooks" / "results").exists()
    assert any((workdir / "results").rglob("turns.parquet")), "no run written to the temp folder"


def test_kernel_is_this_interpreter() -> None:
    """`python3` launches the ipykernel of the interpreter running the tests (the venv's
    own kernelspec, installed with ipykernel; a fresh venv needs no `ipykernel install`)."""
    from jupyter_client.manager import KernelManager
    cmd = KernelManager(kernel_name="python3").format_kernel_cmd()
    assert os.path.realpath(cmd[0]) == os.path.realpath(sys.executable)
    assert cmd[1:3] == ["-m", "ipykernel_launcher"]


def test_committed_notebooks_match_builder() -> None:
    """The .ipynb files are what build_notebooks.py writes (edit the builder, not them)."""
    sys.path.insert(0, str(NOTEBOOKS))
    try:
        import build_notebooks
    finally:
        sys.path.remove(str(NOTEBOOKS))
    for name in EXPECTED:
        built = build_notebooks.build(name)
        committed = nbformat.read(NOTEBOOKS / name, as_version=4)
        assert [c.source for c in committed.cells] == [c.source for c in built.cells], \
            f"{name} differs from build_notebooks.py; run it to regenerate"


def test_ensure_run_reuses_matching_runs_only(write_scenario: Any, tmp_path: Path) -> None:
    from tests.conftest import small_scenario
    scen = write_scenario(small_scenario(turns=4))
    out = tmp_path / "results"
    first = nbh.ensure_run(scen, ["compaction.kind=block"], out)
    assert nbh.ensure_run(scen, ["compaction.kind=block"], out) == first      # same resolved scenario
    assert nbh.ensure_run(scen, ["turns=4", "compaction.kind=block"], out) == first
    other = nbh.ensure_run(scen, ["compaction.kind=prune"], out)
    on_h100 = nbh.ensure_run(scen, ["compaction.kind=block"], out, twin="h100/qwen3-coder-30b-a3b-awq")
    assert len({first, other, on_h100}) == 3
    assert nbh.latest_run("small", out, compaction="prune") == other
    assert nbh.latest_run("small", out, compaction="summarize") is None
    assert nbh.run_summary(first)["ok_turns"] == 4


def test_a_notebook_sweep_reuses_a_matching_run_and_makes_the_others(
        write_scenario: Any, tmp_path: Path) -> None:
    from tests.conftest import small_scenario
    scen = write_scenario(small_scenario(turns=3))
    out = tmp_path / "results"
    made = nbh.ensure_run(scen, ["sessions=2"], out)
    rows = nbh.sweep(scen, [1, 2], [], out)
    assert [r["requested_sessions"] for r in rows] == [1, 2]
    assert rows[1]["run_dirs"] == [str(made)] and rows[0]["run_dirs"] != [str(made)]
    assert rows[1]["simulated"] is True
    assert nbh.sweep(scen, [1, 2], [], out) == rows          # every point reused now


def test_results_dir_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(nbh.RESULTS_ENV, str(tmp_path / "r"))
    assert nbh.results_dir() == tmp_path / "r"
    monkeypatch.delenv(nbh.RESULTS_ENV)
    assert nbh.results_dir() == ROOT / "results"
    assert nbh.scenario_path("claude-code-team") == ROOT / "scenarios" / "claude-code-team.yaml"
    with pytest.raises(InputError):
        nbh.scenario_path("no-such-scenario")
