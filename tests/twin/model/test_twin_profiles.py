"""Profiles: every shipped name loads, unknown names list the known ones, user files work."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.errors import InputError
from simulator.twin.model.profiles import (
    PROFILE_DIR,
    efficiency_for,
    known_names,
    load_engine_settings,
    load_hardware,
    load_model,
)

HARDWARE = ["a40", "l40s", "rtx4090", "a100-80gb", "h100", "h200", "b200", "gb10", "mi300x"]
MODELS = ["qwen3-coder-30b-a3b-awq", "kimi-linear-48b-a3b-awq", "qwen3.6-35b-a3b-nvfp4",
          "qwen3.8-27b-awq", "llama-3.1-8b", "llama-3.1-70b", "gpt-oss-20b", "gpt-oss-120b",
          "qwen3-32b", "qwen3-235b-a22b", "minimax-m2.5"]


@pytest.mark.parametrize("name", [*HARDWARE, "cpu-2core", "cpu-2core-fitted"])
def test_every_hardware_loads_with_sources(name: str) -> None:
    hw = load_hardware(name)
    assert hw.name == name
    assert hw.memory_bytes > 0 and hw.bandwidth_bytes_s > 0 and hw.tflops
    for key in ("memory_bytes", "bandwidth_bytes_s", "tflops", "usd_per_hour"):
        assert hw.sources[key].strip()
    eff, source = efficiency_for(hw)
    assert eff.eta_w > 0 and source


@pytest.mark.parametrize("name", [*MODELS, "tiny-llama-2l", "smollm2-135m"])
def test_every_model_loads_with_consistent_params(name: str) -> None:
    m = load_model(name)
    assert m.name == name
    p = m.params
    expert_params = (m.experts.moe_layers * m.experts.total * m.experts.params_per_expert
                     if m.experts else 0.0)
    summed = p.embedding + p.lm_head + p.dense_other + expert_params
    assert summed == pytest.approx(p.total, rel=0.03)
    assert p.active <= p.total
    assert m.quantization in m.quantizations


def test_shipped_names_are_exactly_the_issue_names() -> None:
    assert set(HARDWARE) | {"cpu-2core", "cpu-2core-fitted"} == set(known_names("hardware"))
    assert set(MODELS) | {"tiny-llama-2l", "smollm2-135m"} == set(known_names("models"))


def test_hybrids_are_marked() -> None:
    assert load_model("qwen3.8-27b-awq").layers.full_attention == 16
    assert load_model("qwen3.8-27b-awq").layers.linear_attention == 48
    assert load_model("kimi-linear-48b-a3b-awq").is_hybrid
    assert not load_model("llama-3.1-8b").is_hybrid


@pytest.mark.parametrize("loader,kind", [(load_hardware, "hardware"), (load_model, "model")])
def test_unknown_name_lists_known_names(loader: object, kind: str) -> None:
    with pytest.raises(InputError) as info:
        loader("no-such-thing")  # type: ignore[operator]
    msg = str(info.value)
    assert "\n" not in msg and f"unknown {kind}" in msg
    known = "a40" if kind == "hardware" else "llama-3.1-8b"
    assert known in msg


def test_user_profile_file_by_path(tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILE_DIR / "hardware" / "h100.yaml").read_text())
    data["name"], data["bandwidth_bytes_s"] = "my-card", 1.0e12
    path = tmp_path / "my-card.yaml"
    path.write_text(yaml.safe_dump(data))
    hw = load_hardware(str(path))
    assert hw.name == "my-card" and hw.bandwidth_bytes_s == 1.0e12
    assert load_model(PROFILE_DIR / "models" / "llama-3.1-8b.yaml").name == "llama-3.1-8b"


def test_user_file_errors_name_file_and_key(tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILE_DIR / "hardware" / "h100.yaml").read_text())
    data["memory_bytes"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"bad\.yaml: memory_bytes"):
        load_hardware(path)
    del data["sources"]["usd_per_hour"]
    data["memory_bytes"] = 1
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="missing a source note for usd_per_hour"):
        load_hardware(path)
    with pytest.raises(InputError, match="not found"):
        load_hardware(tmp_path / "absent.yaml")


@pytest.mark.parametrize("value", [0, 65, "4", True, 2.5])
def test_a_bad_first_text_token_names_the_file_and_key(tmp_path: Path, value: object) -> None:
    data = yaml.safe_load((PROFILE_DIR / "models" / "gpt-oss-20b.yaml").read_text())
    data["chat_first_text_token"] = value
    path = tmp_path / "bad-model.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"bad-model\.yaml: chat_first_text_token") as err:
        load_model(path)
    assert "\n" not in str(err.value)


def test_the_first_text_token_needs_a_source_only_when_set(tmp_path: Path) -> None:
    """gpt-oss's 4 (its harmony header) is sourced; a model at the default 1 needs none,
    but a user's model that sets it must say where it comes from."""
    assert load_model("gpt-oss-20b").sources["chat_first_text_token"].strip()
    assert load_model("qwen3-32b").chat_first_text_token == 1
    data = yaml.safe_load((PROFILE_DIR / "models" / "qwen3-32b.yaml").read_text())
    data["chat_first_text_token"] = 2
    path = tmp_path / "think.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="missing a source note for chat_first_text_token"):
        load_model(path)


def test_engine_settings_layering() -> None:
    base = load_engine_settings()
    assert (base.block_size, base.gpu_memory_utilization, base.kv_dtype) == (16, 0.9, "fp8")
    cpu = load_engine_settings(load_hardware("cpu-2core"), {"max_num_seqs": 4})
    assert (cpu.block_size, cpu.kv_dtype, cpu.max_num_seqs) == (32, "bf16", 4)
    with pytest.raises(InputError, match="spec"):
        load_engine_settings(None, {"spec": "eagle"})
