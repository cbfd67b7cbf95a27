"""CPU per metered request of the reference n-gram meter ("what n-gram speculation
would see", `simulator.twin.spec_decode.predictability`), before and after the bulk index.

It runs a scenario on the in-process twin once, recording every (session, prompt ids,
reply ids) the twin's meter was given, then replays that sequence through
`IndexMeter` (the engine's proposer replayed pass by pass: the meter until issue 28's
second round) and `ReferenceMeter` (bulk n-gram index, fresh stretches skipped),
checks that both count the same passes for every request, and prints the CPU µs per
request (best of `--rounds`). `--client` also times the client-side meter that real
endpoints use (`simulator.endpoints.client_meter`: tiktoken on the request's new
messages and the reply, then the same count), per request, from a cold meter as a
run pays it, on the (request, reply) pairs of the same scenario run in-process.

    python benchmarks/ngram_meter.py --client                 # endurance, 4 × 60 turns
    python benchmarks/ngram_meter.py --scenario scenarios/calibration/code-edit-single-stream.yaml
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator.twin.spec_decode import predictability  # noqa: E402  (after the sys.path insert)

Pair = tuple[str, "array[int]", tuple[int, ...]]


def capture(scenario: str, sessions: int, turns: int) -> list[Pair]:
    """Every (session, prompt, reply) the twin metered in one run (all sessions)."""
    from unittest import mock

    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    seen: list[Pair] = []

    def recording(self: Any, prompt: Any, reply: Any, session: str = "",
                  **_: Any) -> int | None:
        seen.append((session, array("I", prompt), tuple(reply)))
        return None

    with mock.patch.object(predictability.ReferenceMeter, "passes", recording), \
            tempfile.TemporaryDirectory() as tmp:
        execute(RunSpec(scenario, [f"sessions={sessions}", f"turns={turns}"],
                        out_dir=Path(tmp), show_progress=False), echo=lambda _: None)
    return seen


def capture_requests(scenario: str, sessions: int, turns: int) -> list[tuple[Any, Any]]:
    """Every (LLMRequest, LLMResponse) of one in-process twin run, in order: what the
    client meter sees on a real server (a real run meters only its first 8 sessions)."""
    from unittest import mock

    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    seen: list[tuple[Any, Any]] = []

    class Recording:
        def annotate(self, request: Any, response: Any) -> Any:
            # without the twin's own count, as a real server's reply comes
            seen.append((request, dataclasses.replace(response, extra={})))
            return response

    with mock.patch("simulator.session.runner._client_meter", lambda _: Recording()), \
            tempfile.TemporaryDirectory() as tmp:
        execute(RunSpec(scenario, [f"sessions={sessions}", f"turns={turns}"],
                        out_dir=Path(tmp), show_progress=False), echo=lambda _: None)
    return seen


def time_client(pairs: list[tuple[Any, Any]], rounds: int) -> tuple[float, float]:
    """(best CPU µs per request of `ClientMeter.annotate` from a cold meter, as a run
    pays it; the client-tokenised reference tokens/pass)."""
    from simulator.endpoints.client_meter import ClientMeter
    best, figure = float("inf"), 0.0
    for _ in range(rounds):
        meter = ClientMeter(max_sessions=10**9)
        t = time.process_time()
        extras = [meter.annotate(q, r).extra for q, r in pairs]
        best = min(best, (time.process_time() - t) / len(pairs) * 1e6)
        figure = sum(e["ngram_ref_tokens"] for e in extras) / sum(
            e["ngram_ref_passes"] for e in extras)
    return best, figure


def time_meter(make: Any, pairs: list[Pair], rounds: int) -> tuple[float, list[int | None]]:
    """(best CPU µs per request over `rounds` replays, the counts of the last)."""
    best, counts = float("inf"), []
    for _ in range(rounds):
        meter = make(max_sessions=10**9)
        t = time.process_time()
        counts = [meter.passes(p, r, s) for s, p, r in pairs]
        best = min(best, (time.process_time() - t) / len(pairs) * 1e6)
    return best, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "claude-code-endurance.yaml"))
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--client", action="store_true",
                    help="also time the client-side meter real endpoints use")
    args = ap.parse_args()
    pairs = capture(args.scenario, args.sessions, args.turns)
    prompt = sum(len(p) for _, p, _ in pairs) / len(pairs)
    reply = sum(len(r) for _, _, r in pairs) / len(pairs)
    print(f"{Path(args.scenario).name}, {args.sessions} sessions × {args.turns} turns: "
          f"{len(pairs)} requests, mean prompt {prompt:,.0f} tokens, reply {reply:,.0f}")
    before, a = time_meter(predictability.IndexMeter, pairs, args.rounds)
    after, b = time_meter(predictability.ReferenceMeter, pairs, args.rounds)
    if a != b:
        raise SystemExit("the two meters disagree on some request's passes")
    out = sum(len(r) for _, _, r in pairs)
    passes = sum(c or 0 for c in b)
    print(f"  reference tokens/pass {out / passes:.2f} (both meters, every request equal)")
    print(f"  IndexMeter (engine proposer, pass by pass): {before:,.0f} µs CPU per request")
    print(f"  ReferenceMeter (bulk index):                {after:,.0f} µs CPU per request "
          f"({before / after:.1f}× less)")
    if args.client:
        pairs_c = capture_requests(args.scenario, args.sessions, args.turns)
        cost, figure = time_client(pairs_c, args.rounds)
        print(f"  ClientMeter (tokenise the request's new messages and the reply, then "
              f"count): {cost:,.0f} µs CPU per request, reference {figure:.2f} tokens/pass "
              f"in client tokens")


if __name__ == "__main__":
    main()
