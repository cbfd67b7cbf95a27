"""How often n-gram speculation drafts on real replies vs the twin's calibration text.

Run: `python benchmarks/ngram_hit_rate.py [--transcripts DIR …] [--vllm]` (the `--vllm`
part under `flock /tmp/real-engine.lock`: it starts vLLM CPU serving SmolLM2 for about
two minutes). For each source it replays vLLM's n-gram proposer (ngram:5, lookup 5–5, the
calibration's setting; `spec_decode.draft_rate`) over every reply after its context, in
cl100k tokens, and prints the share of decode passes that drafted (vLLM's num_drafts ÷
decode steps), the draft tokens per pass and tokens per pass:

- `twin fresh-text`: the twin's replies to `scenarios/calibration/fresh-text.yaml` (the
  calibration's 32-stream and fresh-text rows), as the in-process twin writes them;
- `twin endurance`: the bundled `claude-code-endurance.yaml`, for comparison;
- `transcripts`: the visible text (text blocks and tool-use arguments) of Claude Code
  transcripts against each call's history (`importers.predictability.measure`'s pairs);
  the bundled test fixture by default;
- `vllm smollm2` (`--vllm`): SmolLM2-135M's own replies (greedy, 300 tokens) to the
  fresh-text scenario's prompts, sent as text to vLLM CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ngram_meter import capture  # noqa: E402

from simulator.twin.spec_decode.draft_rate import DraftStats, total  # noqa: E402
from simulator.twin.spec_decode.ngram import NgramSpec  # noqa: E402
from simulator.util import tokens  # noqa: E402

SPEC = NgramSpec(5)
FRESH = str(ROOT / "scenarios" / "calibration" / "fresh-text.yaml")
ENDURANCE = str(ROOT / "scenarios" / "claude-code-endurance.yaml")
FIXTURE = ROOT / "tests" / "fixtures" / "claude_code" / "proj"


def twin_pairs(scenario: str, sessions: int, turns: int) -> list[tuple[Sequence[int], Sequence[int]]]:
    return [(prompt, reply) for _, prompt, reply in capture(scenario, sessions, turns)]


def transcript_pairs(paths: list[Path]) -> list[tuple[list[int], list[int]]]:
    """(history, visible reply) per call, cl100k, as the importer measures them."""
    from simulator.importers.claude_code import parse_transcripts
    from simulator.importers.predictability import _text
    t = parse_transcripts(paths)
    out: list[tuple[list[int], list[int]]] = []
    for s in t.sessions:
        history: list[int] = []
        for call in s.calls:
            user = call.user
            if call.compaction is not None:
                history, user = [], call.user[call.compaction[2]:]
            for b in user:
                history += tokens.encode(_text(b))
            reply = [x for b in call.assistant if b.kind != "thinking"
                     for x in tokens.encode(_text(b))]
            out.append((list(history), reply))
            history += reply
    return out


def vllm_pairs(prompts: list[Sequence[int]], max_tokens: int) -> list[tuple[list[int], list[int]]]:
    """SmolLM2's greedy replies on vLLM CPU to the prompts (decoded to text)."""
    from simulator.engines.install import SMOLLM2_CONTEXT, ensure_smollm2, ensure_vllm
    from simulator.engines.server import serve_vllm
    engine, smol = ensure_vllm(), ensure_smollm2()
    assert smol.hf_dir is not None
    enc = tokens.encoding()
    out = []
    with serve_vllm(engine, Path(tempfile.mkdtemp(prefix="hit-rate-")), model_dir=smol.hf_dir,
                    model_name="smol", max_model_len=SMOLLM2_CONTEXT,
                    extra_args=("--dtype", "float32")) as server:
        for p in prompts:
            text = enc.decode(list(p)[-5000:])        # within SmolLM2's 8k window
            body = {"model": "smol", "messages": [{"role": "user", "content": text}],
                    "max_tokens": max_tokens, "temperature": 0.0}
            req = urllib.request.Request(server.base_url + "/v1/chat/completions",
                                         json.dumps(body).encode(),
                                         {"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as resp:
                got: Any = json.loads(resp.read())
            reply = str(got["choices"][0]["message"]["content"] or "")
            out.append((tokens.encode(text), tokens.encode(reply)))
    return out


def row(name: str, s: DraftStats) -> str:
    per = s.draft_tokens / s.passes if s.passes else 0.0
    return (f"| {name} | {s.passes} | {100 * s.hit_rate:.1f}% | {per:.2f} | "
            f"{s.tokens_per_pass:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transcripts", type=Path, nargs="*", default=[FIXTURE])
    ap.add_argument("--vllm", action="store_true", help="also SmolLM2's replies on vLLM CPU")
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--turns", type=int, default=3)
    args = ap.parse_args(argv)
    fresh = twin_pairs(FRESH, args.sessions, args.turns)
    lines = ["| source | decode passes | passes that drafted | draft tokens per pass "
             "| tokens per pass |", "|---|---|---|---|---|",
             row("twin fresh-text.yaml", total(fresh, SPEC)),
             row("twin claude-code-endurance.yaml", total(twin_pairs(ENDURANCE, 2, 10), SPEC))]
    if args.transcripts:
        lines.append(row("transcripts (visible text)",
                         total(transcript_pairs(args.transcripts), SPEC)))
    if args.vllm:
        lines.append(row("vLLM CPU SmolLM2 on the fresh-text prompts",
                         total(vllm_pairs([p for p, _ in fresh], 300), SPEC)))
    print(f"ngram:{SPEC.num_speculative_tokens}, prompt lookup {SPEC.prompt_lookup_min}–"
          f"{SPEC.prompt_lookup_max}, cl100k tokens\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
