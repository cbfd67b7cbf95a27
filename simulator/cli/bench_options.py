"""`run --bench ISL:OSL --concurrency C --requests N …`: the benchmark load shape's short
form (`scenario/bench.py`, docs/bench.md), turned into `--set bench.*=…` overrides of
the scenario (the bundled `scenarios/bench.yaml` when no SCENARIO is given)."""

from __future__ import annotations

import re
from typing import Any

import click

from simulator.errors import InputError

_SHAPE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
_UNIFORM = re.compile(r"^\s*uniform\s*:\s*([0-9]*\.?[0-9]+)\s*$")


def bench_options(f: Any) -> Any:
    """The options, as parameters of the command they decorate."""
    opts = [
        click.option("--bench", "bench", metavar="ISL:OSL", default=None,
                     help="The benchmark load shape (docs/bench.md): N requests of ISL "
                     "input and OSL output tokens, as `vllm bench serve` sends them; "
                     "figures by its definitions. Without SCENARIO: scenarios/bench.yaml."),
        click.option("--concurrency", type=click.IntRange(min=1), default=None,
                     help="--bench: at most C requests in flight (vLLM's "
                     "--max-concurrency; a closed loop when all start at once)."),
        click.option("--requests", type=click.IntRange(min=1), default=None,
                     help="--bench: requests measured (vLLM's --num-prompts)."),
        click.option("--request-rate", "request_rate", type=click.FloatRange(min=0,
                     min_open=True, max=1e6), default=None,
                     help="--bench: send at R req/s, Poisson (vLLM's --request-rate, "
                     "burstiness 1); default all at once."),
        click.option("--num-warmups", "num_warmups", type=click.IntRange(min=0), default=None,
                     help="--bench: W warm-up requests first, left out of the figures."),
        click.option("--prefix-share", "prefix_share", type=click.FloatRange(min=0, max=1,
                     max_open=True), default=None,
                     help="--bench: share of each prompt that is a prefix every request "
                     "shares (default 0: random prompts)."),
        click.option("--lengths", "lengths", default=None, metavar="fixed|uniform:R",
                     help="--bench: lengths fixed (default) or uniform in [L(1-R), L(1+R)] "
                     "(vLLM's --random-range-ratio)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def bench_overrides(bench: str | None, concurrency: int | None, requests: int | None,
                    request_rate: float | None, num_warmups: int | None,
                    prefix_share: float | None, lengths: str | None) -> list[str]:
    """The `--set bench.*` items the options stand for; InputError (one line) for a
    malformed shape, or a bench option given without --bench."""
    given = {"--concurrency": concurrency, "--requests": requests,
             "--request-rate": request_rate, "--num-warmups": num_warmups,
             "--prefix-share": prefix_share, "--lengths": lengths}
    if bench is None:
        stray = [k for k, v in given.items() if v is not None]
        if stray:
            raise InputError(f"{stray[0]} shapes a --bench run; give --bench ISL:OSL")
        return []
    m = _SHAPE.match(bench)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise InputError(f"--bench {bench!r}: expected ISL:OSL, input and output tokens "
                         "per request, e.g. 8192:1024")
    out = [f"bench.input_tokens={int(m.group(1))}", f"bench.output_tokens={int(m.group(2))}"]
    for key, value in (("concurrency", concurrency), ("requests", requests),
                       ("request_rate", request_rate), ("warmups", num_warmups),
                       ("prefix_share", prefix_share)):
        if value is not None:
            out.append(f"bench.{key}={value}")
    if lengths is not None:
        out.append(f"bench.range_ratio={_range_ratio(lengths)}")
    return out


def _range_ratio(text: str) -> float:
    """`fixed` → 0, `uniform:R` → R (0 ≤ R < 1)."""
    if text.strip() == "fixed":
        return 0.0
    m = _UNIFORM.match(text)
    if not m or not float(m.group(1)) < 1:
        raise InputError(f"--lengths {text!r}: expected fixed or uniform:R with 0 <= R < 1 "
                         "(lengths uniform in [L(1-R), L(1+R)])")
    return float(m.group(1))
