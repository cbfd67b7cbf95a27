"""The registry's keys as types: `MetricKey`/`FactKey` list exactly the registry's
metrics and facts, the typed records cover them, mypy rejects a misspelt key, and a
name a user types (an SLO) is still checked at run time with the same one-line error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from simulator.analysis import metrics_registry as registry
from simulator.analysis.metric_keys import (
    BlockFact,
    FactKey,
    FlagFact,
    LabelKey,
    NumberFact,
    NumberKey,
    SummaryRecord,
    TextFact,
    fact,
    figure,
    is_metric_key,
)
from simulator.analysis.point_row import PointRow
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_metric_keys_are_the_registry_metrics() -> None:
    typed = [*get_args(NumberKey), *get_args(LabelKey)]
    assert len(typed) == len(set(typed))
    assert set(typed) == set(registry.REGISTRY), \
        "add the metric to metric_keys.NumberKey (or LabelKey) and to SummaryRecord"
    assert set(get_args(LabelKey)) == {m.key for m in registry.METRICS if m.unit == "label"}


def test_fact_keys_are_the_registry_facts() -> None:
    assert set(get_args(FactKey)) == set(registry.FACT_KEYS)
    groups = [set(get_args(g)) for g in (FlagFact, TextFact, NumberFact, BlockFact)]
    assert all(g <= set(registry.FACT_KEYS) for g in groups)
    assert sum(map(len, groups)) == len(set().union(*groups))     # each fact in one group
    hints = get_type_hints(SummaryRecord)
    assert all(hints[k] in (bool | None, bool) for k in groups[0])
    assert all(hints[k] in (str | None, str) for k in groups[1])


def test_a_record_reads_figures_and_facts_by_typed_key() -> None:
    rec: SummaryRecord = {"per_session_tok_s": 3.0, "steady_state": False,
                          "ngram_reference_tokens": "twin tokens"}
    assert figure(rec, "per_session_tok_s") == 3.0 and figure(rec, "ttft_p95_s") is None
    assert figure(rec, "ngram_reference_tokens") == "twin tokens"
    assert fact(rec, "steady_state") is False and fact(rec, "saturated") is None


def test_the_records_type_every_registry_key() -> None:
    hints = get_type_hints(SummaryRecord)
    assert set(hints) == set(registry.REGISTRY) | set(registry.FACT_KEYS)
    for m in registry.METRICS:            # counts are ints, a label a string
        want = str | None if m.unit == "label" else (
            int | None if m.fmt == "{:d}" else float | None)
        assert hints[m.key] == want, m.key
    assert set(get_type_hints(PointRow)) >= set(hints)


def test_a_user_typed_metric_is_checked_at_run_time() -> None:
    assert is_metric_key("window_ttft_p95_s") and not is_metric_key("window_ttft_p59_s")
    assert parse_slo("window_ttft_p95_s<=4").metric == "window_ttft_p95_s"
    with pytest.raises(InputError) as e:
        parse_slo("window_ttft_p59_s<=4")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("--slo 'window_ttft_p59_s<=4': unknown metric "
                                   "'window_ttft_p59_s'; known: ")


def test_a_summary_reads_figures_by_typed_key() -> None:
    s = RunSummary.from_json({"turns": 7, "per_session_tok_s": 31.5, "simulated": True,
                              "ngram_reference_tokens": "twin tokens"})
    assert s.figure("ok_turns") == 7 and s.figure("per_session_tok_s") == 31.5
    assert s.figure("window_ttft_p95_s") is None       # steady keys absent: not computed
    assert s.figure("ngram_reference_tokens") == "twin tokens"
    assert s.fact("simulated") is True and s.fact("status") is None
    rec = s.record()
    assert rec["ok_turns"] == 7 and rec.get("simulated") is True
    assert rec == s.to_json()


@pytest.mark.slow
def test_mypy_rejects_a_misspelt_metric(tmp_path: Path) -> None:
    """The check itself: code that names a metric (or fact) the registry lacks fails
    mypy, building a record or reading a summary, a record, a row or the registry; the
    same code spelt right passes."""
    def code(name: str, fact_name: str) -> str:
        return textwrap.dedent(f"""\
            from simulator.analysis.metric_keys import SummaryRecord, fact, figure
            from simulator.analysis.point_row import PointRow
            from simulator.analysis.run_summary import RunSummary
            from simulator.analysis import metrics_registry as registry

            def f(s: RunSummary, r: SummaryRecord, p: PointRow) -> object:
                built: SummaryRecord = {{"{name}": 1.0}}
                return (built, s.figure("{name}"), figure(r, "{name}"), p["{name}"],
                        registry.BY_KEY["{name}"], fact(r, "{fact_name}"))
            """)
    (tmp_path / "good.py").write_text(code("window_ttft_p95_s", "steady_state"))
    (tmp_path / "bad.py").write_text(code("window_ttft_p59_s", "steady_stat"))

    def mypy(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", str(path)],
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    good, bad = mypy(tmp_path / "good.py"), mypy(tmp_path / "bad.py")
    assert good.returncode == 0, good.stdout
    assert bad.returncode == 1
    assert bad.stdout.count(": error:") == 6, bad.stdout   # one per misspelt key
