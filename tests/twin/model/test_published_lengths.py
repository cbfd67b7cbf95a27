"""Issue 56: a source whose client drew its lengths in [0.8 n, n] (InferenceMAX's
`--random-range-ratio 0.8`) is repeated with the same draw, on the rows its sources.yaml
rule names, the nominal lengths kept."""

from __future__ import annotations

import csv
import io
import re
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.twin.model.published import (
    load_arrival_rules,
    load_first_text_rules,
    load_length_rules,
    load_prompt_rules,
    load_published,
    one_per_measurement,
)

ROOT = Path(__file__).resolve().parents[3]
COLUMNS = ("source_id,card,gpus,tp,ep,model,twin_model,weight_format,kv_dtype,vllm_version,"
           "input_tokens,output_tokens,concurrency,num_prompts,ttft_mean_ms,tpot_mean_ms,notes")


def _folder(tmp_path: Path, lengths: str) -> Path:
    (tmp_path / "sources.yaml").write_text(
        "sources:\n  drawn:\n    split: in_sample\n"
        + textwrap.indent(lengths, "    ") + "\n  exact:\n    split: out_of_sample\n")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS.split(","))
    for sid, notes in (("drawn", "aic source: db-dump/2026-04-27; config_id=1"),
                       ("drawn", "aic source: source_file=/x/gap-analysis.csv"),
                       ("exact", "aic source: db-dump/2026-04-27; config_id=1")):
        w.writerow([sid, "h200", 1, 1, 0, "openai/gpt-oss-120b", "gpt-oss-120b", "mxfp4", "",
                    "", 8192, 1024, 4, 40, 400.0, 7.0, notes])
    (tmp_path / "rows.csv").write_text(buf.getvalue())
    return tmp_path


def test_matching_rows_are_run_with_the_clients_draw(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "lengths:\n  low_ratio: 0.8\n  rows: 'db-dump/'")
    rows = load_published(folder).rows
    drawn, other, exact = sorted(rows, key=lambda r: (r.source_id, r.line))
    assert (drawn.input_tokens, drawn.output_tokens, drawn.low_ratio) == (8192, 1024, 0.8)
    assert "8192/1024 (each drawn in [0.8 n, n])" in drawn.label()
    loads = {o.bench_load() for o in drawn.observations()}
    assert {(b.input_tokens, b.output_tokens, b.low_ratio) for b in loads} == {(8192, 1024, 0.8)}
    # a row the rule does not name, and a source without a rule, run every request at n
    assert (other.input_tokens, other.output_tokens, other.low_ratio) == (8192, 1024, 0.0)
    assert (exact.input_tokens, exact.output_tokens, exact.low_ratio) == (8192, 1024, 0.0)


@pytest.mark.parametrize(("rule", "field"), [
    ("lengths:\n  low_ratio: 1.5\n  rows: 'x'", "lengths.low_ratio"),
    ("lengths:\n  low_ratio: true\n  rows: 'x'", "lengths.low_ratio"),
    ("lengths:\n  low_ratio: 0.8", "lengths.rows"),
    ("lengths:\n  low_ratio: 0.8\n  rows: '('", "lengths.rows"),
    ("lengths: 0.8", "lengths.low_ratio"),
    ("prompts:\n  per_concurrency: 0\n  rows: 'x'", "prompts.per_concurrency"),
    ("prompts:\n  per_concurrency: 2.5\n  rows: 'x'", "prompts.per_concurrency"),
    ("prompts:\n  per_concurrency: true\n  rows: 'x'", "prompts.per_concurrency"),
    ("prompts:\n  per_concurrency: 10", "prompts.rows"),
    ("prompts:\n  per_concurrency: 10\n  rows: '['", "prompts.rows"),
    ("prompts: 10", "prompts.per_concurrency"),
    ("fit:\n  rows: '('", "fit.rows"),
    ("fit: {}", "fit.rows"),
    ("fit: yes", "fit.rows"),
    ("arrivals:\n  interval_s: 0\n  rows: 'x'", "arrivals.interval_s"),
    ("arrivals:\n  interval_s: .inf\n  rows: 'x'", "arrivals.interval_s"),
    ("arrivals:\n  interval_s: '0.5'\n  rows: 'x'", "arrivals.interval_s"),
    ("arrivals:\n  interval_s: 0.5", "arrivals.rows"),
    ("arrivals: 0.5", "arrivals.interval_s"),
    ("first_text: {}", "first_text.rows"),
    ("first_text:\n  rows: '('", "first_text.rows"),
    ("first_text: yes", "first_text.rows"),
])
def test_a_bad_rule_ends_in_one_line_naming_the_field(tmp_path: Path, rule: str,
                                                      field: str) -> None:
    folder = _folder(tmp_path, rule)
    with pytest.raises(InputError, match=rf"sources\.drawn\.{re.escape(field)}") as err:
        load_published(folder)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("source", "said"), [
    ("drawn: in_sample", "not None"),                    # a description that is not a mapping
    ("drawn:\n    split: sideways", "not 'sideways'"),
])
def test_a_source_without_a_side_is_refused_in_one_line(tmp_path: Path, source: str,
                                                        said: str) -> None:
    (tmp_path / "sources.yaml").write_text(f"sources:\n  {source}\n")
    with pytest.raises(InputError, match=r"sources\.drawn\.split: in_sample or "
                                         rf"out_of_sample, {said}") as err:
        load_published(tmp_path)
    assert "\n" not in str(err.value)


def test_the_shipped_rule_names_the_inferencex_rows_of_aiconfigurator() -> None:
    """984 of aiconfigurator's 1,196 rows are InferenceX database records (sources.yaml
    gives the evidence) and every inferencemax_gptoss row names the same client; the
    gap-analysis rows and every other source keep fixed lengths."""
    folder = ROOT / "benchmarks" / "data" / "published"
    rules = load_length_rules(folder)
    assert set(rules) == {"aiconfigurator_silicon", "inferencemax_gptoss"}
    for sid, named in (("aiconfigurator_silicon", 984), ("inferencemax_gptoss", 196)):
        rule = rules[sid]
        with (folder / f"{sid}.csv").open(newline="") as f:
            notes = [r["notes"] for r in csv.DictReader(f)]
        assert sum(map(rule.applies, notes)) == named
        assert (rule.bounds(1024), rule.bounds(8192)) == ((819, 1024), (6553, 8192))


def _prompt_folder(tmp_path: Path, rule: str) -> Path:
    """Three closed-loop rows at C = 8: one the rule names with no count stated, one it
    names with a count stated, one it does not name."""
    (tmp_path / "sources.yaml").write_text(
        "sources:\n  drawn:\n    split: in_sample\n" + textwrap.indent(rule, "    ") + "\n")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS.split(","))
    for stated, notes in (("", "db-dump/1"), ("40", "db-dump/2"), ("", "gap-analysis")):
        w.writerow(["drawn", "h200", 1, 1, 0, "openai/gpt-oss-120b", "gpt-oss-120b", "mxfp4",
                    "", "", 1024, 1024, 8, stated, 400.0, 7.0, notes])
    (tmp_path / "rows.csv").write_text(buf.getvalue())
    return tmp_path


def test_a_prompt_rule_sets_the_unstated_request_count_of_the_rows_it_names(
        tmp_path: Path) -> None:
    folder = _prompt_folder(tmp_path, "prompts:\n  per_concurrency: 10\n  rows: 'db-dump/'")
    named, stated, other = sorted(load_published(folder).rows, key=lambda r: r.line)
    assert (named.num_prompts, named.prompts_rule) == (80, True)
    assert all(o.num_prompts == 80 for o in named.observations())
    # a stated count wins; a row the rule does not name keeps the default 4 waves of C
    assert (stated.num_prompts, stated.prompts_rule) == (40, False)
    assert (other.num_prompts, other.prompts_rule) == (32, False)


def test_the_shipped_prompt_rule_names_the_same_inferencex_rows() -> None:
    """InferenceX runs --num-prompts CONC x 10: the rows whose lengths it drew are the rows
    whose request count it set."""
    folder = ROOT / "benchmarks" / "data" / "published"
    prompts, lengths = load_prompt_rules(folder), load_length_rules(folder)
    assert set(prompts) == {"aiconfigurator_silicon"}
    rule = prompts["aiconfigurator_silicon"]
    assert rule.per_concurrency == 10
    with (folder / "aiconfigurator_silicon.csv").open(newline="") as f:
        notes = [r["notes"] for r in csv.DictReader(f)]
    assert [rule.applies(n) for n in notes] == \
        [lengths["aiconfigurator_silicon"].applies(n) for n in notes]


def test_a_rows_bench_load_is_what_its_observations_run(tmp_path: Path) -> None:
    """tp_fidelity runs a row's `bench_load()`; the fit and card_fidelity run its
    observations': both carry the client's draw."""
    folder = _folder(tmp_path, "lengths:\n  low_ratio: 0.8\n  rows: 'db-dump/'")
    for row in load_published(folder).rows:
        assert {o.bench_load() for o in row.observations()} == {row.bench_load()}


def test_a_count_past_what_the_twin_runs_is_skipped_with_its_reason(tmp_path: Path) -> None:
    """10 x C at C = 20,000 is 200,000 requests: the row is left out, said, not a
    validation traceback when its observations are built."""
    folder = _prompt_folder(tmp_path, "prompts:\n  per_concurrency: 10\n  rows: 'db-dump/'")
    rows = (folder / "rows.csv").read_text().replace(",1024,1024,8,,", ",1024,1024,20000,,")
    (folder / "rows.csv").write_text(rows)
    got = load_published(folder)
    assert got.skipped == {"more requests than the twin repeats in one run (100,000)": 1}
    assert sorted(r.num_prompts for r in got.rows) == [40, 80_000]


def test_a_fit_rule_leaves_the_rows_it_does_not_name_to_scoring(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "fit:\n  rows: 'db-dump/'")
    named, other, exact = sorted(load_published(folder).rows, key=lambda r: (r.source_id, r.line))
    assert (named.fitted, other.fitted) == (True, False)
    assert exact.fitted        # a source without a fit rule: every row may be fitted


def test_the_shipped_fit_rule_fits_the_rows_whose_load_is_known() -> None:
    """The fitted rows of aiconfigurator are the InferenceX records, whose client, draw and
    request count the `lengths` and `prompts` rules name; its gap-analysis rows, which
    name none, are scored only. No other source has a fit rule."""
    folder = ROOT / "benchmarks" / "data" / "published"
    rows = load_published(folder).rows
    lengths = load_length_rules(folder)["aiconfigurator_silicon"]
    aic = [r for r in rows if r.source_id == "aiconfigurator_silicon"]
    with (folder / "aiconfigurator_silicon.csv").open(newline="") as f:
        notes = {i: r["notes"] for i, r in enumerate(csv.DictReader(f), start=2)}
    assert all(r.fitted == lengths.applies(notes[r.line]) for r in aic)
    assert any(not r.fitted for r in aic) and any(r.fitted for r in aic)
    assert all(r.fitted for r in rows if r.source_id != "aiconfigurator_silicon")


def test_an_arrival_rule_feeds_the_rows_it_names_one_request_per_tick(tmp_path: Path) -> None:
    """A client that queues a request every 0.5 s under a semaphore of C: the rows the
    rule names run at 2 req/s, evenly spaced, under C (their observations too); a row it
    does not name, and a source without the rule, stay all at once under C."""
    folder = _folder(tmp_path, "arrivals:\n  interval_s: 0.5\n  rows: 'db-dump/'")
    named, other, exact = sorted(load_published(folder).rows, key=lambda r: (r.source_id, r.line))
    load = named.bench_load()
    assert (load.concurrency, load.request_rate, load.burstiness) == (4, 2.0, float("inf"))
    assert {o.bench_load() for o in named.observations()} == {load}
    assert "C=4 fed every 0.5 s" in named.label()
    for row in (other, exact):
        assert (row.request_rate, row.burstiness, row.concurrency) == (None, 1.0, 4)


def test_a_row_with_its_own_rate_and_an_arrival_rule_is_refused_in_one_line(
        tmp_path: Path) -> None:
    folder = _folder(tmp_path, "arrivals:\n  interval_s: 0.5\n  rows: 'db-dump/'")
    rows = (folder / "rows.csv").read_text()
    (folder / "rows.csv").write_text(rows.replace("concurrency,num_prompts",
                                                  "concurrency,request_rate,num_prompts")
                                     .replace(",8192,1024,4,40,", ",8192,1024,4,3,40,"))
    with pytest.raises(InputError, match=r"rows\.csv:2: request_rate 3 and its source's "
                                         "arrivals rule") as err:
        load_published(folder)
    assert "\n" not in str(err.value)


def test_the_shipped_arrival_rule_names_every_gpu_conc_row() -> None:
    """gpu_conc's client (concurrency.py @7098c82) queues a request every 0.5 s: all 16 of
    its rows, and no other source's."""
    folder = ROOT / "benchmarks" / "data" / "published"
    rules = load_arrival_rules(folder)
    assert set(rules) == {"gpu_conc_gptoss20b"}
    assert rules["gpu_conc_gptoss20b"].interval_s == 0.5
    with (folder / "gpu_conc_gptoss20b.csv").open(newline="") as f:
        notes = [r["notes"] for r in csv.DictReader(f)]
    assert len(notes) == 16 and all(map(rules["gpu_conc_gptoss20b"].applies, notes))
    fed = [r for r in load_published(folder).rows if r.burstiness == float("inf")]
    assert fed and {r.source_id for r in fed} == {"gpu_conc_gptoss20b"}


def test_a_first_text_rule_times_its_rows_from_their_models_token_with_text(
        tmp_path: Path) -> None:
    """A client that times the first chunk with text: the rows the rule names are timed
    from their model's first token with text (gpt-oss-120b's 4th: harmony's header
    streams none), their observations saying so; a row it does not name, and a source
    without it, from the first token."""
    folder = _folder(tmp_path, "first_text:\n  rows: 'db-dump/'")
    named, other, exact = sorted(load_published(folder).rows, key=lambda r: (r.source_id, r.line))
    assert (named.first_text, named.first_timed_token) == (True, 4)
    assert "timed from token 4" in named.label() and named.bench_load().first_timed_token == 4
    assert {o.first_text for o in named.observations()} == {True}
    assert {o.bench_load(4).first_timed_token for o in named.observations()} == {4}
    for row in (other, exact):
        assert (row.first_text, row.first_timed_token) == (False, 1)
        assert {o.bench_load(4).first_timed_token for o in row.observations()} == {1}


def test_a_model_without_a_hidden_opening_is_timed_from_its_first_token(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "first_text:\n  rows: 'db-dump/'")
    rows = (folder / "rows.csv").read_text()
    (folder / "rows.csv").write_text(rows.replace("openai/gpt-oss-120b,gpt-oss-120b,mxfp4",
                                                  "Qwen/Qwen3-32B,qwen3-32b,bf16"))
    named = min(load_published(folder).rows, key=lambda r: (r.source_id, r.line))
    assert (named.first_text, named.first_timed_token) == (True, 1)


def test_the_shipped_first_text_rule_names_gpu_conc_rows_only() -> None:
    """gpu_conc's client times the first chunk with text (concurrency.py @7098c82), on
    gpt-oss-20b's chat stream: all 16 of its rows, timed from token 4; no other source's
    (vLLM's own client times the role chunk, sent with the first token)."""
    folder = ROOT / "benchmarks" / "data" / "published"
    rules = load_first_text_rules(folder)
    assert set(rules) == {"gpu_conc_gptoss20b"}
    with (folder / "gpu_conc_gptoss20b.csv").open(newline="") as f:
        notes = [r["notes"] for r in csv.DictReader(f)]
    assert len(notes) == 16 and all(map(rules["gpu_conc_gptoss20b"].applies, notes))
    timed = [r for r in load_published(folder).rows if r.first_timed_token > 1]
    assert timed and {r.source_id for r in timed} == {"gpu_conc_gptoss20b"}
    assert {r.first_timed_token for r in timed} == {4}


def test_one_measurement_listed_twice_is_kept_once(tmp_path: Path) -> None:
    """The same load with the same figures to the last digit, listed under two notes, is
    one measurement (aiconfigurator's db dump and its dated CSV); another figure, or
    another concurrency, is another measurement. The first listing is kept."""
    folder = _folder(tmp_path, "fit:\n  rows: 'aic'")
    first, again, other = sorted(load_published(folder).rows, key=lambda r: (r.source_id, r.line))
    assert one_per_measurement([first, again, other]) == [first]
    changed = replace(again, figures={**again.figures, "ttft_mean": 0.401})
    assert one_per_measurement([first, changed]) == [first, changed]
    assert one_per_measurement([first, replace(again, concurrency=8)]) == \
        [first, replace(again, concurrency=8)]


def test_h200s_fitted_rows_hold_each_measurement_once() -> None:
    """h200's fitted rows hold aiconfigurator runs listed twice (10 of them in its fit
    subset of 38 at stop 65); once, no repeat is left."""
    folder = ROOT / "benchmarks" / "data" / "published"
    rows = [r for r in load_published(folder).rows
            if r.card == "h200" and r.split == "in_sample" and r.fitted]
    once = one_per_measurement(rows)
    assert len(once) < len(rows)
    assert len(one_per_measurement(once)) == len(once)
