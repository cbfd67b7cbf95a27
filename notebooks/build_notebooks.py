"""Write the three analysis notebooks (outputs cleared) from the cells below.

    .venv/bin/python notebooks/build_notebooks.py

Edit the cells here, not in the .ipynb files, so the notebooks stay easy to review and
regenerate. Every number a notebook shows is computed by the library at run time.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SHOW = """

def show(fig):
    \"\"\"Display a library Figure (Agg, no pyplot) as a PNG.\"\"\"
    display(Image(figure_png(fig)))

"""


def setup_cell(imports: str, params: str) -> str:
    """The first code cell: imports (isort order), the `show` helper, the parameters."""
    return imports + SHOW + params


ENDURANCE = [
    new_markdown_cell("""\
# One long session: throughput, context and cache over hundreds of turns

This notebook reads one run of `scenarios/claude-code-endurance.yaml` (a single
Claude-Code-style session with block compaction) through the library's functions and
draws the figures of `endurance report`. Set `RUN_DIR` (the parameters, in the first
code cell) to the results directory of the run to read — one made with `endurance run`,
real endpoint or twin. Left at `None`, it reads a run of the scenario with exactly these
settings (the default A40 twin, `TURNS` turns), made now on the in-process twin when
`results/` has none (virtual time, a few seconds). The run's hardware, model and
settings are printed before any figure; figures from the twin are **simulated** and
labelled so."""),
    new_code_cell(setup_cell("""\
from pathlib import Path

import pandas as pd
from IPython.display import Image, display

from simulator import lab as nb
from simulator.analysis.load import load_run, load_saved_summary, run_label
from simulator.analysis.summary import ok_rows, summarize_run
from simulator.report import plots
from simulator.report.console import summary_table
from simulator.report.plots import figure_png
""", """\
RUN_DIR = None                   # parameter: a results directory to read (None: see above)
SCENARIO = "claude-code-endurance"
TURNS = 120                      # only for the twin run used when RUN_DIR is None
RESULTS = nb.results_dir()
""")),
    new_code_cell("""\
if RUN_DIR is not None:
    run_dir = Path(RUN_DIR)
else:
    run_dir = nb.ensure_run(nb.scenario_path(SCENARIO), [f"turns={TURNS}"], RESULTS)
print(nb.describe_run(run_dir))
manifest, turns, server = load_run(run_dir)
summary = summarize_run(manifest, turns, server, load_saved_summary(run_dir))
simulated = manifest.simulated
turn_ok = ok_rows(turns, "turn")
print(f"run {run_label(manifest, run_dir)} ({'SIMULATED twin' if simulated else 'real endpoint'}), "
      f"{len(turn_ok)} successful turns, compaction {manifest.compaction}, "
      f"seed {manifest.seed}")
"""),
    new_markdown_cell("## Summary table"),
    new_code_cell("""\
pd.DataFrame(summary_table(summary), columns=["figure", "value"]).set_index("figure")
"""),
    new_markdown_cell("""\
## Turn throughput over turns
Each dot is one turn (output tokens / request time); the line is a rolling median.
Red lines mark compaction events and red triangles the turn right after each one,
which pays for re-reading a context whose cached prefix was just invalidated."""),
    new_code_cell("""\
show(plots.plot_turn_throughput(turns, turn_ok, simulated=simulated))
print(f"{summary['compaction_events']} compaction events; median turn tok/s right after one "
      f"{summary['post_compaction_turn_tok_s_median'] or float('nan'):.1f} vs "
      f"{summary['other_turn_tok_s_median'] or float('nan'):.1f} elsewhere; first third "
      f"{summary['first_third_tok_s']:.1f} → last third {summary['last_third_tok_s']:.1f} tok/s "
      f"({summary['drift_pct']:+.1f}%)")
"""),
    new_markdown_cell("## Context size: the saw-tooth of compaction"),
    new_code_cell("""\
show(plots.plot_context(turn_ok, simulated=simulated))
print(f"context tokens: first {summary['context_tokens_first']:,.0f}, "
      f"max {summary['context_tokens_max']:,.0f}, last {summary['context_tokens_last']:,.0f}")
"""),
    new_markdown_cell("""\
## Cache reuse, three ways
The client's view (the share of the context that is an unchanged prefix of the
previous request), the server-reported cache-read share of prompt tokens, and — when a
real server's `/metrics` was scraped — its prefix-cache counters per scrape window."""),
    new_code_cell("""\
show(plots.plot_cache(turn_ok, server, simulated=simulated))
for key in ("client_reusable_share", "server_cache_read_share", "server_prefix_cache_hit_share"):
    value = summary.get(key)
    print(f"{key}: {'n/a' if value is None else f'{100 * value:.1f}%'}")
"""),
    new_markdown_cell("## Time to first token against context size"),
    new_code_cell("""\
show(plots.plot_ttft_vs_context(turns, turn_ok, simulated=simulated))
print(f"TTFT p50 {summary['ttft_p50_s']:.2f} s, p95 {summary['ttft_p95_s']:.2f} s")
if turn_ok["session_id"].nunique() > 1:
    show(plots.plot_session_lanes(turn_ok, simulated=simulated))
"""),
    new_markdown_cell("""\
## Over time, and the distributions
KV usage, preemptions, running and waiting requests (from the server's `/metrics`, or
the twin's engine log), aggregate tok/s and active sessions against time; then the CDFs
of TTFT, inter-token time and turn tok/s with p50/p90/p99 marked."""),
    new_code_cell("""\
show(plots.plot_timeline(turns, server, simulated=simulated))
show(plots.plot_cdfs(turn_ok, simulated=simulated))
"""),
]

COMPACTION = [
    new_markdown_cell("""\
# Compaction strategies on the same workload

The endurance scenario replayed with four compaction policies — `block` (drop a block
of old messages when a high-water mark is reached), `prune` (trim every turn to a
budget), `summarize` (ask the model for a summary) and `clear_tool_results` (blank old
tool outputs) — on the same seed, so the runs replay the same turns and can be compared
turn by turn. Runs are made on the in-process twin (**simulated**) when `results/` has
none with these settings. The paired comparison is the ratio of sustained tok/s over
matched turns with a moving-block bootstrap confidence interval (`compare_runs`)."""),
    new_code_cell(setup_cell("""\
import dataclasses

import pandas as pd
from IPython.display import Image, display

from simulator import lab as nb
from simulator.analysis.compare import compare_runs, load_runs
from simulator.report.compare import format_comparison, write_overlay
from simulator.report.plots import figure_png
""", """\
RUN_DIRS = {}                    # parameter: {kind: results directory} of your own runs
SCENARIO = "claude-code-endurance"
TURNS = 120                      # for the twin runs made for kinds missing from RUN_DIRS
KINDS = ["block", "prune", "summarize", "clear_tool_results"]
RESULTS = nb.results_dir()
""")),
    new_code_cell("""\
path = nb.scenario_path(SCENARIO)
run_dirs = {kind: RUN_DIRS.get(kind) or nb.ensure_run(
    path, [f"turns={TURNS}", f"compaction.kind={kind}"], RESULTS) for kind in KINDS}
for kind, d in run_dirs.items():
    print(f"{kind}: {nb.describe_run(d)}")
runs = [dataclasses.replace(r, label=kind) for kind, r in zip(KINDS, load_runs(list(run_dirs.values())), strict=True)]
seeds = {r.manifest.seed for r in runs}
print(f"{len(runs)} runs of {SCENARIO}, {TURNS} turns, seed(s) {sorted(seeds)}")
"""),
    new_markdown_cell("## Side by side (Δ against `block`)"),
    new_code_cell("""\
result = compare_runs(runs, resamples=2000, seed=0)
print(format_comparison(result))
"""),
    new_markdown_cell("## Paired comparison: sustained tok/s ratio against `block`"),
    new_code_cell("""\
paired = pd.DataFrame(result["paired"])[
    ["label_b", "label_a", "matched_turns", "ratio", "ci_low", "ci_high", "excludes_one"]]
paired
"""),
    new_markdown_cell("## Overlay: rolling-median turn throughput"),
    new_code_cell("""\
overlay = write_overlay(runs, RESULTS / "compaction_overlay.png")
display(Image(filename=str(overlay)))
"""),
    new_markdown_cell("""\
## Discussion
Computed from the runs above: the ranking by sustained tok/s, whether each paired
confidence interval excludes 1, and what each policy did to the context and cache."""),
    new_code_cell("""\
figures = pd.DataFrame({r.label: r.summary for r in runs}).T
ranking = figures["aggregate_tok_s"].astype(float).sort_values(ascending=False)
print("ranking by sustained tok/s: " + ", ".join(f"{k} {v:.1f}" for k, v in ranking.items()))
for p in result["paired"]:
    verdict = ("clearly " + ("faster" if p["ratio"] > 1 else "slower")) if p["excludes_one"] \\
        else "not distinguishable"
    print(f"{p['label_b']} vs {p['label_a']}: ratio {p['ratio']:.3f} "
          f"({100 * p['confidence']:.0f}% CI {p['ci_low']:.3f}–{p['ci_high']:.3f}) → {verdict} "
          f"than {p['label_a']} over {p['matched_turns']} matched turns")
for kind, s in figures.iterrows():
    print(f"{kind}: {s['compaction_events']} compactions, peak context {s['context_tokens_max']:,.0f} tok, "
          f"cache shared {s['cache_shared_pct']:.1f}%, TTFT p95 {s['ttft_p95_s']:.2f} s")
"""),
    new_markdown_cell("""\
A policy that rewrites the conversation on every turn (pruning, clearing tool results)
changes the prefix the server has cached, so each request re-reads more of its prompt;
one that compacts rarely (block) keeps a stable prefix between events and pays once per
event. The lines above say which way these runs went and how sure the bootstrap is."""),
]

SIZING = [
    new_markdown_cell("""\
# How many simultaneous sessions does a card hold?

`scenarios/claude-code-team.yaml` (coding sessions sharing a ~20k-token prefix) swept
over session counts on three twin hardware profiles with the same model, then
`nb.size` finds the largest count meeting the SLOs by a geometric probe, a gallop from
where the figures put the boundary (a bisection when they give none) and a repeat run,
and names the binding constraint. Short sessions (`TURNS` turns) keep
this fast; every figure is **simulated** by the twin. Runs are reused from `results/`
when they exist.

**Why the answer differs from `endurance size`.** `endurance size
scenarios/claude-code-team.yaml …` runs the scenario's own 120-turn sessions; here they
last `TURNS` turns, so contexts stay short, each turn re-reads less and per-session tok/s
stays higher: more sessions pass the same SLO than `size` finds on the A40. Set
`TURNS = None` to size the scenario as written — the two then agree (slower). As in
`endurance sweep` and `size` (`nb.sweep` and `nb.size` run the same pipeline), the
SLOs are judged on each point's steady-state window (`window_…` columns; the plain names
are the whole run's, as in summary.json) and the repeat run uses another seed."""),
    new_code_cell(setup_cell("""\
import pandas as pd
from IPython.display import Image, display

from simulator import lab as nb
from simulator.report import plots
from simulator.report.console import format_sizing, format_sweep_table
from simulator.report.plots import figure_png
""", """\
SCENARIO = "claude-code-team"
TURNS = 6                        # parameter: None = the scenario's own turns, as `endurance size`
COUNTS = [1, 2, 4, 8]
MODEL = "qwen3-coder-30b-a3b-awq"
TWINS = [f"{hw}/{MODEL}" for hw in ("a40", "h100", "gb10")]
SLOS = ["per_session_tok_s>=50", "ttft_p95_s<=5"]
MAX_SESSIONS = 8                 # the sweep's largest count: its runs are reused
RESULTS = nb.results_dir() / "sizing"
path = nb.scenario_path(SCENARIO)
OVERRIDES = [] if TURNS is None else [f"turns={TURNS}"]
""")),
    new_markdown_cell("## Sweep"),
    new_code_cell("""\
sweeps = {}
for twin in TWINS:      # every figure of each point's run; window_… is its steady-state window
    sweeps[twin] = nb.sweep(path, COUNTS, OVERRIDES, RESULTS, twin=twin)
    print(nb.describe_run(sweeps[twin][-1]["run_dirs"][-1]))
    print(format_sweep_table(sweeps[twin]), end="\\n\\n")
table = pd.concat({t: pd.DataFrame(rows).set_index("requested_sessions")
                   for t, rows in sweeps.items()}, names=["twin"])
table[["window_aggregate_tok_s", "window_per_session_tok_s", "window_ttft_p95_s",
       "cache_shared_pct", "window_usd_per_mtok"]]
"""),
    new_markdown_cell("## Aggregate and per-session tok/s against sessions"),
    new_code_cell("""\
fig = plots.new_figure(12.0, 4.5)
ax_agg, ax_per = fig.subplots(1, 2)
for twin, rows in sweeps.items():
    n = [r["requested_sessions"] for r in rows]
    ax_agg.plot(n, [r["window_aggregate_tok_s"] for r in rows], "o-", label=twin.split("/")[0])
    ax_per.plot(n, [r["window_per_session_tok_s"] for r in rows], "s--",
                label=twin.split("/")[0])
for ax, what in ((ax_agg, "aggregate tok/s"), (ax_per, "per-session sustained tok/s")):
    ax.set_xscale("log", base=2)
    ax.set_xticks(COUNTS, [str(c) for c in COUNTS])
    ax.set(title=what, xlabel="concurrent sessions", ylabel=what, ylim=(0, None))
    ax.grid(alpha=0.3)
    ax.legend(title="hardware")
fig.suptitle(f"Throughput vs sessions — simulated (twin), {MODEL}, {SCENARIO}, "
             f"{TURNS or 'the scenario’s'} turns each")
fig.subplots_adjust(top=0.85, wspace=0.3)
show(fig)
for rows in sweeps.values():
    show(plots.plot_sweep(rows))
"""),
    new_markdown_cell("## Sizing under the SLOs"),
    new_code_cell("""\
answers = {}
for twin in TWINS:
    # SLOs judged on the steady-state window; the repeat reruns the answer with seed + 1
    answers[twin] = nb.size(path, SLOS, MAX_SESSIONS, OVERRIDES, RESULTS, twin=twin)
    print(twin)
    print(format_sizing(answers[twin]), end="\\n\\n")
"""),
    new_code_cell("""\
pd.DataFrame([{"twin": t, "sessions": a.sessions, "confirmed": "yes" if a.confirmed else "no",
               "range over seeds": "–".join(map(str, a.sessions_range)), "binding": a.binding,
               "binding_kind": a.binding_kind, "kv_capacity_sessions": a.kv_capacity_sessions,
               "probes": len(a.probes)} for t, a in answers.items()]).set_index("twin")
"""),
    new_code_cell("""\
for twin, a in answers.items():
    answer = f"{a.sessions} session(s) meet" if a.sessions else "no session count meets"
    kv = "n/a" if a.kv_capacity_sessions is None else f"{a.kv_capacity_sessions} sessions"
    print(f"{twin}: {answer} {' and '.join(SLOS)} (simulated, up to {MAX_SESSIONS} tried); "
          f"the limit is {a.binding} [{a.binding_kind}]; the KV cache alone would hold {kv} "
          "at their peak context")
"""),
    new_markdown_cell("""\
## One card in one call

The same search as `endurance size`, as a library call (`simulator.sweep.size`: the
scenario, the SLOs, the twin; its runs go to a new `results/size-…` folder). It answers
as `nb.size` did above for the same card."""),
    new_code_cell("""\
from simulator import sweep

answer = sweep.size(path, SLOS, twin=TWINS[0], overrides=OVERRIDES, max_sessions=MAX_SESSIONS)
print(format_sizing(answer))
print(f"one call: {answer.sessions} session(s) on {TWINS[0]}; nb.size above: "
      f"{answers[TWINS[0]].sessions}")
"""),
]

NOTEBOOKS = {"endurance.ipynb": ENDURANCE, "compaction.ipynb": COMPACTION, "sizing.ipynb": SIZING}


def build(name: str) -> nbformat.NotebookNode:
    """A notebook with the python3 kernel and no outputs."""
    nb = new_notebook(cells=NOTEBOOKS[name])
    for i, cell in enumerate(nb.cells):          # stable ids: regenerating gives no diff
        cell.id = f"{name.removesuffix('.ipynb')}-{i:02d}"
        if "# parameter" in cell.source:         # papermill / nbclient parameter cell
            cell.metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main() -> None:
    for name in NOTEBOOKS:
        nb = build(name)
        nbformat.validate(nb)
        nbformat.write(nb, HERE / name)
        print(HERE / name)


if __name__ == "__main__":
    main()
