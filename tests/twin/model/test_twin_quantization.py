"""`--twin HARDWARE/MODEL:QUANT` picks a quantization; a model that does not fit says
which quantizations do (issue 16, item 4)."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.twin.model.perf_model import build_perf_model, split_quantization


@pytest.mark.parametrize(("text", "out"), [
    ("llama-3.1-70b:fp8", ("llama-3.1-70b", "fp8")), ("llama-3.1-70b", ("llama-3.1-70b", None)),
    ("profiles/my.yaml", ("profiles/my.yaml", None)), ("C:\\p\\m.yaml", ("C:\\p\\m.yaml", None)),
    (":fp8", (":fp8", None)),
])
def test_split_quantization(text: str, out: tuple[str, str | None]) -> None:
    assert split_quantization(text) == out


def test_quantization_suffix_selects_the_variant() -> None:
    pm = build_perf_model("h100", "llama-3.1-70b:fp8")
    assert pm.quantization == "fp8" and pm.kv_capacity_tokens() > 0
    assert 65e9 < pm.weights.total < 80e9   # 1 B/param, embeddings and head in bf16


def test_a_model_that_does_not_fit_names_the_quantizations_that_do() -> None:
    with pytest.raises(InputError, match=r"quantizations that fit: awq \(213,648 KV tokens\), "
                                         r"fp8 \(13,104 KV tokens\) \(e\.g\. "
                                         r"--twin h100/llama-3\.1-70b:awq"):
        build_perf_model("h100", "llama-3.1-70b")
    with pytest.raises(InputError, match="no quantization of it fits"):
        build_perf_model("rtx4090", "llama-3.1-70b")
    with pytest.raises(InputError, match="unknown quantization 'int3'"):
        build_perf_model("h100", "llama-3.1-70b:int3")
