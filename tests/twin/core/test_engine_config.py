"""The twin engine runs on its typed configuration (issue 50, item 4): `engine_config`
carries every setting the engine reads from the roofline model, built once where the
engine is made, and no module of `simulator/twin` reads a setting by `getattr`."""

from __future__ import annotations

import ast
from pathlib import Path

from simulator.twin.core.config import (
    PLAIN_VERIFY_ROWS,
    TwinEngineConfig,
    engine_config,
    plain_config,
)
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import StepShape
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.spec_decode.ngram import NgramSpec

TWIN = Path(__file__).resolve().parents[3] / "simulator" / "twin"
QWEN, KIMI = "qwen3-coder-30b-a3b-awq", "kimi-linear-48b-a3b-awq"


def test_engine_config_carries_the_roofline_settings() -> None:
    pm = build_perf_model("a40", QWEN, spec="ngram:4",
                          overrides={"kv_cache_gib": 4, "kv_offload_gib": 8})
    cfg = engine_config(pm)
    assert (cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens) == (
        pm.engine.max_num_seqs, pm.max_num_batched_tokens)
    assert (cfg.cache.block_size, cfg.cache.num_gpu_blocks) == (pm.block_size, pm.num_blocks)
    assert cfg.cache.kv_bytes_per_token == pm.kv_bytes_per_token > 0
    assert cfg.cache.offload is not None and cfg.cache.offload.gib == 8
    link = pm.hardware.host_link
    assert link is not None and cfg.cache.offload.link.h2d_bytes_s == link.h2d_bytes_s
    assert cfg.speculative.spec == pm.spec and cfg.speculative.verify_rows == pm.verify_rows
    assert not cfg.cache.state_aligned          # a dense model: no hybrid state cache
    eng = TwinEngine(pm, cfg)
    assert eng.host_tier is not None and eng.spec == pm.spec
    assert (eng.block_size, eng.num_blocks) == (pm.block_size, pm.num_blocks)


def test_a_hybrid_gets_its_state_cache_and_retention() -> None:
    pm = build_perf_model("a40", KIMI)
    cfg = engine_config(pm)
    assert cfg.cache.state_aligned and cfg.cache.state_blocks_per_seq == pm.state_blocks_per_seq > 0
    assert cfg.cache.retention_interval == pm.engine.prefix_cache_retention_interval
    kv = TwinEngine(pm, cfg).kv_cache_manager
    assert kv.state_aligned and kv.retention == cfg.cache.retention_interval


def test_no_config_means_the_models_own() -> None:
    pm = build_perf_model("h100", "llama-3.1-8b")
    assert TwinEngine(pm).config == engine_config(pm)
    other = NgramSpec(3)
    assert engine_config(pm, spec=other).speculative.spec is other


class _Plain:
    def step_time(self, shape: StepShape) -> float:
        return 0.01

    def kv_capacity_tokens(self) -> int:
        return 1600


def test_a_plain_perf_model_runs_with_vllm_defaults() -> None:
    cfg = TwinEngine(_Plain()).config
    assert cfg == plain_config(_Plain())
    assert isinstance(cfg, TwinEngineConfig)
    assert (cfg.cache.block_size, cfg.cache.num_gpu_blocks) == (16, 100)
    assert (cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens) == (256, 8192)
    assert cfg.cache.offload is None and cfg.speculative.spec is None
    assert cfg.speculative.verify_rows == PLAIN_VERIFY_ROWS


def _getattr_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == "getattr"]


# the one left: summing `EngineCounters`' integer fields by `dataclasses.fields`
ALLOWED = {"fleet/service.py": 2}


def test_no_setting_is_read_by_getattr_in_the_twin() -> None:
    found = {str(p.relative_to(TWIN)): n for p in sorted(TWIN.rglob("*.py"))
             if (n := len(_getattr_calls(p)))}
    assert found == ALLOWED
