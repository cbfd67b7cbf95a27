"""The twin of this machine, fitted on a real vLLM CPU and checked against it.

Run: `python benchmarks/twin_vs_vllm_cpu.py` (about 10 minutes on an idle 2-core box;
add `--write` to rewrite the fitted profile and the tables in README.md and
docs/twin-fidelity.md). It

1. starts vLLM CPU serving SmolLM2-135M-Instruct (fp32, prefix caching, 8k window), plain
   and with n-gram speculation, on 127.0.0.1 free ports (stopped at the end);
2. runs one session of `scenarios/calibration/twin-vs-vllm-cpu.yaml` against the plain
   server, takes fit points from its turn rows (`endurance twin points`' logic) and fits
   the identifiable efficiency terms of `cpu-2core`;
3. without refitting, runs the same scenario at 2, 4 and 8 sessions on the real server
   and on the fitted twin, and n-gram speculation on vs off on the model's own replies;
   then fits the speculation host term (`spec_step_s`) on one stream of the code probes
   against the speculating server and, without refitting, predicts 2 and 4 streams
   (the twin replays the model's own replies: `twin_check.spec_check`);
4. prints the table (twin, real, error) and, with `--write`, writes
   `simulator/twin/model/profiles/hardware/cpu-2core-fitted.yaml` and the table between the
   `twin-vs-vllm-cpu` markers of README.md and docs/twin-fidelity.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.engines import twin_check as tc
from simulator.engines.install import SMOLLM2_CONTEXT, ensure_smollm2, ensure_vllm
from simulator.engines.server import EngineServer, serve_vllm
from simulator.twin.model.profile_write import yaml_text

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- twin-vs-vllm-cpu:start -->", "<!-- twin-vs-vllm-cpu:end -->"
SPEC_CONFIG = ('{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_max":4,'
               '"prompt_lookup_min":2}')    # tests/engines_fixtures.py SMOL_NGRAM


def replace_block(text: str, block: str) -> str:
    """`text` with what lies between the markers replaced by `block` (markers kept)."""
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        raise SystemExit(f"markers {START} … {END} not found")
    return text[:i + len(START)] + "\n" + block + text[j:]


def _load() -> float:
    return os.getloadavg()[0]


def say(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="rewrite the fitted profile and the README / docs tables")
    ap.add_argument("--turns", type=int, default=None, help="turns per session (scenario: 6)")
    ap.add_argument("--note", default="", help="said after the load in the table's header "
                    "(e.g. what else ran on the machine)")
    ap.add_argument("--spec-only", action="store_true",
                    help="only the speculation check, on the shipped cpu-2core-fitted "
                    "profile (no session fit), repeated --repeats times: the run-to-run "
                    "spread of the real figures beside the twin's")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=tc.SPEC_MAX_TOKENS)
    ap.add_argument("--repredict", type=Path, metavar="DIR",
                    help="no servers: predict a --spec-only run's repeats again (DIR: its "
                    "folder, with spread.json) with the current cpu-2core-fitted profile")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    if args.repredict:
        return repredict(args.repredict)
    engine, smol = ensure_vllm(), ensure_smollm2()
    assert smol.hf_dir is not None
    out = Path(tempfile.mkdtemp(prefix="twin-vs-vllm-cpu-"))
    loads = [_load()]
    with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        def start(extra: tuple[str, ...], name: str) -> EngineServer:
            return stack.enter_context(serve_vllm(
                engine, out / name, model_dir=smol.hf_dir, model_name="smol",
                max_model_len=SMOLLM2_CONTEXT, extra_args=("--dtype", "float32", *extra)))
        f_plain = pool.submit(start, (), "plain")
        f_spec = pool.submit(start, ("--speculative-config", SPEC_CONFIG), "spec")
        plain, spec = f_plain.result(), f_spec.result()
        tc.warm_up(plain)
        tc.warm_up(spec)
        say(f"servers ready after {time.monotonic() - t_start:.0f} s (load {_load():.1f})")
        if args.spec_only:
            return spec_spread(plain, spec, out, args.repeats, args.max_tokens, loads,
                               t_start)

        fit_res = tc.run(tc.SCENARIO, out / "fit", sessions=1, seed=100, turns=args.turns,
                         endpoint=plain.base_url)
        fit, pts = tc.fit_run(fit_res)
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        loads.append(_load())
        profile = tc.fitted_profile(fit, pts, when=when,
                                    conditions=f"1-min load average {loads[-1]:.1f}")
        prof_path = out / f"{tc.FITTED_NAME}.yaml"
        prof_path.write_text(yaml_text(profile), encoding="utf-8")
        twin = f"{prof_path}/{tc.MODEL}"
        say(f"fit: {len(pts.points)} points, RMS log error {100 * fit.rms_log_error:.1f}%: "
            + ", ".join(f"{k} {fit.terms[k]:.4g}" for k in fit.free))

        rows = tc.fit_rows(fit)
        for n in tc.SESSIONS:
            real = tc.run(tc.SCENARIO, out / f"real-{n}", sessions=n, seed=100 + n,
                          turns=args.turns, endpoint=plain.base_url)
            sim = tc.run(tc.SCENARIO, out / f"twin-{n}", sessions=n, seed=100 + n,
                         turns=args.turns, twin=twin)
            rows += tc.session_rows(n, sim, real)
            loads.append(_load())
            say(f"{n} sessions done after {time.monotonic() - t_start:.0f} s "
                f"(load {loads[-1]:.1f})")
        rows += tc.spec_rows(plain, spec, str(prof_path))
        loads.append(_load())
        checked = tc.spec_check(plain, spec, profile, out / "spec")
        profile = checked.profile
        rows += checked.rows
        loads.append(_load())
        say(f"speculation: {', '.join(tc.SPEC_FREE)} "
            + ", ".join(f"{checked.fit.terms[k]:.4g}" for k in tc.SPEC_FREE)
            + f" fitted on one stream; done after {time.monotonic() - t_start:.0f} s "
              f"(load {loads[-1]:.1f})")

    took = time.monotonic() - t_start
    header = (f"Measured {when} on this machine ({os.cpu_count()} cores), "
              f"`python benchmarks/twin_vs_vllm_cpu.py` in {took / 60:.1f} min; "
              f"1-min load average {min(loads):.1f}–{max(loads):.1f} during the runs"
              f"{' (' + args.note + ')' if args.note else ''}; "
              f"fit: {len(pts.points)} points, RMS log error {100 * fit.rms_log_error:.1f}%, "
              + ", ".join(f"{k} {fit.terms[k]:.4g}" for k in fit.free) + ".\n\n")
    say("\n" + header + tc.markdown(rows))
    if args.write:
        tc.FITTED_PATH.write_text(yaml_text(profile, tc.ENGINE_NOTE), encoding="utf-8")
        for doc, table in ((ROOT / "README.md", tc.compact_markdown(rows)),
                           (ROOT / "docs" / "twin-fidelity.md", tc.markdown(rows))):
            doc.write_text(replace_block(doc.read_text(encoding="utf-8"), header + table),
                           encoding="utf-8")
        say(f"wrote {tc.FITTED_PATH.relative_to(ROOT)}, README.md, docs/twin-fidelity.md")
    return 0


def spec_spread(plain: EngineServer, spec: EngineServer, out: Path, repeats: int,
                max_tokens: int, loads: list[float], t_start: float) -> int:
    """The speculation check `repeats` times on the same servers: each repeat fits
    spec_step_s on one stream and predicts 2, 4 and 8 streams; the real figures' range
    over the repeats is the run-to-run spread a prediction is held to."""
    import yaml
    base = yaml.safe_load(tc.FITTED_PATH.read_text(encoding="utf-8"))
    runs: list[list[tc.Row]] = []
    for r in range(repeats):
        checked = tc.spec_check(plain, spec, base, out / f"spec-{r}", max_tokens=max_tokens)
        runs.append(checked.rows)
        (out / "spread.json").write_text(json.dumps(
            {str(i): [row.real for row in rows] for i, rows in enumerate(runs)}),
            encoding="utf-8")
        loads.append(_load())
        say(f"repeat {r + 1}: spec_step_s {checked.fit.terms['spec_step_s']:.4g} s, done "
            f"after {time.monotonic() - t_start:.0f} s (load {loads[-1]:.1f})")
        for row in checked.rows:
            say(f"  {row.setting}: twin {row.twin:.3g}, real {row.real:.3g} tok/s")
    say("\n| streams | twin (each repeat) | vLLM CPU (each repeat) | real spread | twin ÷ real |")
    say("|---|---|---|---|---|")
    for i, row in enumerate(runs[0]):
        tw = [rs[i].twin or 0.0 for rs in runs]
        rl = [rs[i].real or 0.0 for rs in runs]
        ratios = [t / r for t, r in zip(tw, rl, strict=True) if r]
        say(f"| {row.setting.split(',')[0]} | {', '.join(f'{t:.3g}' for t in tw)} | "
            f"{', '.join(f'{v:.3g}' for v in rl)} | ×{max(rl) / min(rl):.2f} | "
            f"{min(ratios):.2f}–{max(ratios):.2f} |")
    say(f"\n{repeats} repeats, {max_tokens} tokens a probe, load {min(loads):.1f}–"
        f"{max(loads):.1f}, {(time.monotonic() - t_start) / 60:.1f} min")
    return 0


def repredict(folder: Path) -> int:
    """A --spec-only run's repeats predicted again, as spec_check does (spec_step_s
    refitted on each repeat's one stream, then 2, 4 and 8 streams replayed), with the
    current profile: what a change of the twin's terms does to the same measurements."""
    import yaml

    from simulator.twin.model.fit import Observation, fit_terms
    from simulator.twin.model.perf_model import build_perf_model
    from simulator.twin.spec_decode.replay import replay_streams
    reals = json.loads((folder / "spread.json").read_text(encoding="utf-8"))
    base = yaml.safe_load(tc.FITTED_PATH.read_text(encoding="utf-8"))
    spec = f"ngram:{tc.SPEC.num_speculative_tokens}"
    for r, real in reals.items():
        ex = folder / f"spec-{r}" / "spec-exchanges.json"
        point = Observation(kind="spec_replay", measured=real[0], unit="tok_s", batch=1,
                            spec=spec, prompt_lookup_min=tc.SPEC.prompt_lookup_min,
                            prompt_lookup_max=tc.SPEC.prompt_lookup_max, exchanges=str(ex),
                            label="1 stream, n-gram speculation")
        path = folder / f"repredict-{r}.yaml"
        path.write_text(yaml_text(base), encoding="utf-8")
        fit = fit_terms([point], str(path), tc.MODEL, free=tc.SPEC_FREE)
        prof = {**base, "efficiency": {**base["efficiency"], **{
            k: float(f"{fit.terms[k]:.5g}") for k in tc.SPEC_FREE}}}
        path.write_text(yaml_text(prof), encoding="utf-8")
        pm = build_perf_model(str(path), tc.MODEL, spec=spec)
        pairs = json.loads(ex.read_text(encoding="utf-8"))
        cells = []
        for n, rl in zip(tc.SPEC_SESSIONS, real[1:], strict=True):
            tw = replay_streams(pairs, tc.SPEC, n, pm)
            rate = sum(a for a, _ in tw) / sum(b for _, b in tw)
            cells.append(f"{n} streams twin {rate:.3g} real {rl:.3g} ({100 * (rate / rl - 1):+.0f}%)")
        say(f"repeat {int(r) + 1}: spec_step_s {1e3 * fit.terms['spec_step_s']:.2f} ms; "
            + "; ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
