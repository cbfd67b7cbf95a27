"""Speculation's cost terms of one twin, each with its value, where it comes from and
whether the card has it of its own (what `endurance twin show` prints).

Pure: reads the perf model's profiles and precomputed terms, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.twin.model.perf_model import (
    PENALTY_BYTES_PER_VOCAB,
    REJECTION_BYTES_PER_VOCAB,
    TOPK_BYTES_PER_VOCAB,
    RooflinePerfModel,
)
from simulator.twin.model.profiles import DEFAULT_EFFICIENCY_HARDWARE
from simulator.twin.spec_decode.ngram import ModelDraftSpec

DERIVED = "derived"
# the terms measured rather than fitted, and on what
MEASURED = {"penalty_row_s": "host", "penalty_pad_tok_s": "host", "topk_row_s": "host",
            "spec_req_s": "vLLM CPU profile"}
# where the sampler's host constants were measured (benchmarks/spec_sampling_host.py)
SAMPLING_HOST = ("vLLM 0.32's own helpers timed on this project's 2-core Zen 4 build host "
                 "(benchmarks/spec_sampling_host.py)")


@dataclass(frozen=True, slots=True)
class SpecTerm:
    name: str
    formula: str
    value: str          # formatted, with its unit
    status: str         # derived | fitted on CARD | own (CARD) | borrowed from CARD | n/a
    source: str


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} µs"


def spec_terms(pm: RooflinePerfModel, context: int = 3000) -> list[SpecTerm]:
    """The speculation terms of `pm` (its spec, or k = 5 when it has none), valued on
    its card; `context` is where the per-sequence attention term is shown."""
    hw, m, eff = pm.hardware, pm.model, pm.efficiency
    k = pm.spec.num_speculative_tokens if pm.spec is not None else 5
    drafter = isinstance(pm.spec, ModelDraftSpec)
    own = hw.speculation.own() if hw.speculation is not None else {}
    fitted_here = hw.efficiency is not None
    values = eff.model_dump()        # the card's terms by name (`Efficiency`'s fields)

    def status(term: str) -> str:
        if term in own:
            return f"own ({hw.name})"
        if fitted_here:
            if term in MEASURED and values[term] > 0:
                return f"measured ({MEASURED[term]})"
            fitted = term in ("spec_step_s", "spec_seq_s") and values[term] > 0
            return f"fitted on {hw.name}" if fitted else f"prior ({hw.name} profile)"
        return f"borrowed from {DEFAULT_EFFICIENCY_HARDWARE}"

    def rows_status(term: str) -> str:
        """A row term: the device traffic is derived (a GPU card), the host part measured."""
        host = status(term) if values[term] > 0 else ""
        device = DERIVED if hw.compute_capability is not None else ""
        return " + ".join(x for x in (device, host) if x) or status(term)

    def src(term: str, fallback: str) -> str:
        return (hw.speculation.source if term in own and hw.speculation is not None
                else fallback)

    be = pm.backend
    q = 1 + k
    vocab = m.params.lm_head / m.hidden_size
    head_row = 2.0 * m.params.lm_head / (eff.eta_c * pm.peak_flops)
    rows = pm.verify_rows[q]
    attn = rows * context * pm._t_pair
    kv = context * pm._t_kv_tok * (1.0 + eff.kv_half_seqs)
    host = "not charged: a drafter keeps async scheduling" if drafter else None
    out = [
        SpecTerm("spec_step_s", "per step, host work serial with the forward pass",
                 host or _ms(eff.spec_step_s), status("spec_step_s"),
                 src("spec_step_s", "fit residual: async scheduling refused with n-gram "
                     "(vLLM 0.32 config/vllm.py)")),
        SpecTerm("spec_req_s", "per proposing request per step, host bookkeeping",
                 host or _ms(eff.spec_req_s), status("spec_req_s"),
                 src("spec_req_s", "vLLM CPU profile: input prep, draft lists and "
                     "update_from_output grow 0.2-1 ms per extra sequence there, too "
                     "noisy to fix a term (benchmarks/spec_profile_vllm_cpu.py)")),
        SpecTerm("penalty rows", "per draft row when a request in the batch has a penalty: "
                 f"host + {PENALTY_BYTES_PER_VOCAB:g} B × vocab / bandwidth",
                 f"{_ms(pm._t_pen_row)} per row ({_ms(eff.penalty_row_s)} host)",
                 rows_status("penalty_row_s"),
                 src("penalty_row_s", "rejection_sampler.apply_penalties → "
                     "layers/utils.apply_penalties (bincounts over the vocabulary); host: "
                     + SAMPLING_HOST)),
        SpecTerm("penalty history", "per draft row × longest output in the batch",
                 f"{eff.penalty_pad_tok_s * 1e9:.3g} ns per padded token",
                 status("penalty_pad_tok_s"),
                 src("penalty_pad_tok_s", "_combine_outputs_with_spec_tokens + "
                     "make_tensor_with_pad (vllm #13247); " + SAMPLING_HOST)),
        SpecTerm("top-k/top-p rows", "per draft row when a request in the batch samples "
                 f"with top-k/top-p: host + {TOPK_BYTES_PER_VOCAB:g} B × vocab / bandwidth",
                 f"{_ms(pm._t_topk_row)} per row ({_ms(eff.topk_row_s)} host)",
                 rows_status("topk_row_s"),
                 src("topk_row_s", "apply_sampling_constraints → apply_top_k_top_p "
                     "(a full-vocabulary sort; PRs 32558, 51507)")),
        SpecTerm("spec_seq_s (residual)", "per decoding sequence per step, left by the fit",
                 host or _ms(eff.spec_seq_s), status("spec_seq_s"),
                 src("spec_seq_s", "fit residual: what the named terms leave of the "
                     "calibration's 32-stream ratio")),
        SpecTerm("ngram_ctx_tok_s", "per context token each proposing sequence scans",
                 "n/a (drafter)" if drafter else f"{eff.ngram_ctx_tok_s * 1e9:.3g} ns",
                 status("ngram_ctx_tok_s"),
                 src("ngram_ctx_tok_s", "vLLM PR 56732: 66.3 M tokens in 70.28 ms on one "
                     "thread (ngram_proposer.py, single-threaded in 0.32)")),
        SpecTerm("lm head per verified row", "2 · N_head / (η_c · F), in the roofline",
                 _ms(head_row), DERIVED,
                 "gpu_model_runner._calc_spec_decode_metadata: logits on all 1 + k rows"),
        SpecTerm("rejection sampler per draft row",
                 f"{REJECTION_BYTES_PER_VOCAB:g} B × vocab {vocab:,.0f} / bandwidth",
                 _ms(REJECTION_BYTES_PER_VOCAB * vocab / hw.bandwidth_bytes_s), DERIVED,
                 "v1/sample/rejection_sampler.py, random sampling"),
        SpecTerm("verification attention",
                 f"max(0, tile rows × context × FLOPs/pair / (η_attn·F) − KV read); "
                 f"q = {q}: {rows:g} rows per head",
                 (f"{_ms(attn - kv)} per sequence at {context:,} context" if attn > kv
                  else f"0 (under its KV read) at {context:,} context"),
                 DERIVED, f"{be.name if be else 'no CUDA backend'} query tiles "
                 "(twin/model/execution.py)"),
    ]
    if be is None:
        out.append(SpecTerm("CUDA-graph mode", "none modelled", "0", "n/a",
                            "not a CUDA card"))
    else:
        cc = hw.compute_capability
        assert cc is not None
        support = pm._support if pm.spec is not None else be.graphs
        ceiling = pm._ceiling or min(pm.engine.max_num_seqs * q * 2,
                                     1024 if cc[0] == 10 else 512)
        out.append(SpecTerm(
            "CUDA-graph mode", f"{be.name}: {support}; eager past {ceiling} tokens",
            {"always": "full graphs", "uniform_batch": "full if every decode has 1 + k "
             "tokens, else piecewise", "single_token": "piecewise",
             "never": "eager"}[support],
            DERIVED, "vLLM 0.32 platforms/cuda.py, backends' _cudagraph_support, "
            "config/vllm.py _set_cudagraph_sizes"))
        out.append(SpecTerm("piecewise_step_s", "per decode step that loses its full graph",
                            "never (full graphs)" if support == "always"
                            else _ms(eff.piecewise_step_s),
                            "n/a" if support == "always" else status("piecewise_step_s"),
                            src("piecewise_step_s", "A40: inside spec_step_s (every drafted "
                                "step runs piecewise there)")))
    out.append(SpecTerm("eager_step_s", "per step run without CUDA graphs",
                        _ms(eff.eager_step_s), status("eager_step_s"),
                        src("eager_step_s", "estimate: Kimi-Linear 3–4× slower with "
                            "graphs off (calibration)")))
    if be is not None and be.uniform_queries:
        out.append(SpecTerm("MLA prefill path", "t_ctx · context of each demoted decode",
                            f"{_ms(pm._t_ctx_tok * context)} per sequence at "
                            f"{context:,} context", DERIVED,
                            "mla_attention.py split_decodes_and_prefills(require_uniform)"))
    return out
