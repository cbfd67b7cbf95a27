"""Bench points (issue 56): a `vllm bench serve` figure is predicted by the same run on the
twin, and a point that cannot be is refused in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.twin.bench.closed_loop import run_bench
from simulator.twin.model.fit import Observation, load_points, predict
from simulator.twin.model.perf_model import build_perf_model


def _point(**kw: object) -> Observation:
    base: dict[str, object] = {"kind": "bench", "measured": 0.1, "unit": "s",
                               "input_tokens": 256, "output_tokens": 16, "num_prompts": 8,
                               "concurrency": 4, "metric": "ttft_mean"}
    return Observation.model_validate({**base, **kw})


def test_a_bench_point_is_the_run_on_the_twin() -> None:
    pm = build_perf_model("a40", "qwen3-coder-30b-a3b-awq")
    p = _point()
    ref = run_bench(pm, p.bench_load())
    assert predict(pm, p) == pytest.approx(ref.mean_ttft_ms / 1000)
    tok = _point(metric="output_tok_s", unit="tok_s", measured=100.0)
    assert predict(pm, tok) == pytest.approx(ref.output_throughput)


@pytest.mark.parametrize(("fields", "words"), [
    ({"metric": None}, "needs a metric"),
    ({"unit": "tok_s"}, "measured in s"),
    ({"input_tokens": 0}, "input_tokens > 0"),
    ({"output_tokens": 1, "metric": "tpot_mean"}, "TPOT needs output_tokens >= 2"),
])
def test_bad_bench_points_are_one_line(tmp_path: Path, fields: dict[str, object],
                                       words: str) -> None:
    import yaml
    point = {"kind": "bench", "measured": 0.1, "unit": "s", "input_tokens": 256,
             "output_tokens": 16, "num_prompts": 8, "concurrency": 4,
             "metric": "ttft_mean", **fields}
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump({"points": [{k: v for k, v in point.items() if v is not None}]}))
    with pytest.raises(InputError, match=words) as err:
        load_points(f)
    assert "\n" not in str(err.value) and str(f) in str(err.value)


def test_metric_belongs_to_bench_points() -> None:
    with pytest.raises(ValueError, match="bench point's field"):
        Observation(kind="decode", measured=10.0, unit="tok_s", metric="ttft_mean")
