"""Hardware, model and engine profiles for the twin: YAML data files, validated once.

Every number lives in a data file under `simulator/twin/model/profiles/` with a `source` note
(why we believe it). Users add their own card or model by passing a path to a YAML file
of the same shape instead of a name. Units are in the field names (bytes, bytes/s, s).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from simulator.errors import InputError
from simulator.twin.model import vllm_versions
from simulator.twin.spec_decode.ngram import ModelDraftSpec, parse_spec
from simulator.util.bounded import text_file

PROFILE_DIR = Path(__file__).parent / "profiles"
DEFAULT_EFFICIENCY_HARDWARE = "a40"   # cards without a fit of their own borrow this one
KvDtype = Literal["bf16", "fp16", "fp8"]
KV_DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
_M = TypeVar("_M", bound=BaseModel)
_SPEC_RE = re.compile(r"^(off|(ngram|draft|mtp):[1-9][0-9]*(@[1-9][0-9]*)?)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Efficiency(_Strict):
    """Fitted terms of the roofline; seconds, fractions, bytes."""

    t0_s: float = Field(ge=0)              # fixed cost per engine step
    t_seq_s: float = Field(ge=0)           # extra cost per sequence in the step
    eta_w: float = Field(gt=0, le=1)       # weight-streaming bandwidth efficiency
    eta_kv: float = Field(gt=0, le=1)      # KV-read efficiency with many sequences
    kv_half_seqs: float = Field(ge=0)      # sequences at which KV reads reach half of eta_kv
    eta_s: float = Field(gt=0, le=1)       # recurrent-state bandwidth efficiency
    eta_c: float = Field(gt=0, le=1)       # MFU of the linear layers (prefill)
    eta_attn: float = Field(gt=0, le=1)    # MFU of attention FLOPs (prefill)
    routing_skew: float = Field(ge=0)      # Zipf exponent s of expert popularity
    reserve_bytes: float = Field(ge=0)     # activations, CUDA graphs, non-torch memory
    # share of the shorter of a step's memory time and compute time that runs under the
    # longer: 1 on a GPU (its GEMMs stream weights while the tensor cores compute); a
    # CPU's cores do both in turn, so its steps add them (measured on vLLM CPU, issue 48)
    eta_overlap: float = Field(default=1.0, ge=0, le=1)
    # speculative decoding (vLLM's spec_decode source; profiles/calibration/); zero on cards never measured
    # (`perf_model.spec_time` lists every term; the LM head per verified row, the
    # verification attention and the rejection sampler are derived, not fitted)
    spec_step_s: float = Field(default=0.0, ge=0)     # host work per step, serial with the
    #                                                   forward pass (async scheduling off)
    spec_verify_tok_s: float = Field(default=0.0, ge=0)   # per draft token beyond the
    #                                                       derived terms (0: none)
    spec_seq_s: float = Field(default=0.0, ge=0)   # residual per decoding sequence per
    #                                                step with spec on: what the named
    #                                                terms below leave of a fit (0: none)
    spec_req_s: float = Field(default=0.0, ge=0)   # host bookkeeping per proposing request
    #                                                per step (input prep, draft lists,
    #                                                update_from_output), measured
    # the sampler's host work on the draft rows (issue 48), measured on vLLM's own code:
    # with a penalty in the batch, per draft row and per padded output-history token
    # (`_combine_outputs_with_spec_tokens` + `make_tensor_with_pad`); with top-k/top-p,
    # per draft row beyond the sort's device traffic (the whole sort on a CPU card)
    penalty_row_s: float = Field(default=0.0, ge=0)
    penalty_pad_tok_s: float = Field(default=0.0, ge=0)
    topk_row_s: float = Field(default=0.0, ge=0)
    ngram_ctx_tok_s: float = Field(default=0.0, ge=0)  # CPU n-gram scan, per context token
    #                                                    of each proposing sequence
    piecewise_step_s: float = Field(default=0.0, ge=0)   # per decode step run with
    #                                         piecewise CUDA graphs where it had full ones
    eager_step_s: float = Field(default=0.0, ge=0)   # per step run without CUDA graphs
    # the mixed step (issue 56): a step that carries prefill chunks beside running decodes
    # runs piecewise CUDA graphs and the variable-length attention kernel where a pure
    # decode step replays one full graph; per such step and per sequence in it (0: none)
    mixed_step_s: float = Field(default=0.0, ge=0)
    mixed_seq_s: float = Field(default=0.0, ge=0)
    # tensor parallelism (`tensor_parallel_size` > 1): per all-reduce (two per layer per
    # step), a fitted residual beyond what `parallel` prices from the card's tp_link
    # (its latency and bytes); 0: none
    allreduce_s: float = Field(default=0.0, ge=0)
    source: str


# Terms of the card (launches, attention, KV reads, memory left over, the mixed step) and
# terms of the kernels a weight format runs (GEMM efficiency, dequantising weight reads,
# MoE routing): `efficiency_for` composes a card's terms with its model's family's.
CARD_TERMS = ("t0_s", "t_seq_s", "eta_kv", "kv_half_seqs", "eta_attn", "reserve_bytes",
              "mixed_step_s", "mixed_seq_s", "allreduce_s")
FAMILY_TERMS = ("eta_c", "eta_w", "routing_skew")


class CardTerms(_Strict):
    """Terms fitted on this card whatever the model (each None: not fitted here)."""

    t0_s: float | None = Field(default=None, ge=0)
    t_seq_s: float | None = Field(default=None, ge=0)
    eta_kv: float | None = Field(default=None, gt=0, le=1)
    kv_half_seqs: float | None = Field(default=None, ge=0)
    eta_attn: float | None = Field(default=None, gt=0, le=1)
    reserve_bytes: float | None = Field(default=None, ge=0)
    mixed_step_s: float | None = Field(default=None, ge=0)
    mixed_seq_s: float | None = Field(default=None, ge=0)
    allreduce_s: float | None = Field(default=None, ge=0)
    source: str

    def own(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump(exclude={"source"}).items() if v is not None}


class FamilyTerms(_Strict):
    """Terms of one kernel family (`kernel_family`) fitted on this card."""

    eta_c: float | None = Field(default=None, gt=0, le=1)
    eta_w: float | None = Field(default=None, gt=0, le=1)
    routing_skew: float | None = Field(default=None, ge=0)
    source: str

    def own(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump(exclude={"source"}).items() if v is not None}


# weight format of a model's quantization (the kernels vLLM runs for it): Marlin-style
# W4A16 dequantising GEMMs, FP8 (W8A8) GEMMs, FP4 (MXFP4/NVFP4) GEMMs, plain BF16
WEIGHT_FORMATS = {"awq": "w4a16", "gptq": "w4a16", "w4a16": "w4a16", "bf16": "bf16",
                  "fp16": "bf16", "fp32": "bf16", "fp8": "fp8", "mxfp4": "fp4",
                  "nvfp4": "fp4", "nvfp4-fp4": "fp4", "int8": "int8"}


def kernel_family(model: ModelProfile, quantization: str | None = None) -> str:
    """`FORMAT-moe` or `FORMAT-dense`: the family whose kernel terms a model runs with."""
    q = quantization or model.quantization
    fmt = WEIGHT_FORMATS.get(q, q)
    return f"{fmt}-{'moe' if model.experts is not None else 'dense'}"


# The `Efficiency` terms `endurance twin fit` frees by default; the rest keep their values.
DEFAULT_FREE = ("t0_s", "kv_half_seqs", "routing_skew", "eta_c", "eta_attn", "reserve_bytes")


MAX_HOST_GIB = 1_048_576.0      # 1 PiB: a host KV tier past any machine's memory


class EngineSettings(_Strict):
    """vLLM engine settings the twin models (CLI flags of `vllm serve`)."""

    block_size: int = Field(gt=0)
    max_num_seqs: int = Field(gt=0)
    max_num_batched_tokens: int = Field(gt=0)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    kv_dtype: KvDtype
    spec: str = "off"
    enable_prefix_caching: bool = True
    # vLLM --kv-offloading-size (GiB of host memory for evicted KV; 0: off), at most
    # 1 PiB (past any host's memory; 1e308 GiB overflowed the tier's block count)
    kv_offload_gib: float = Field(default=0.0, ge=0, le=MAX_HOST_GIB, allow_inf_nan=False)
    # the vLLM release imitated (`vllm_versions`): it picks the defaults that moved
    # between releases (the retention below, when "auto")
    vllm_version: str = vllm_versions.DEFAULT_VERSION
    # hybrids' kept states (vLLM CacheConfig.prefix_cache_retention_interval): 0 the replay
    # boundary and shared-prefix junctions only, None every block boundary a step ends
    # on, N > 0 also every N tokens (a multiple of the block size); "auto": the
    # vllm_version's default (`with_version_defaults`)
    prefix_cache_retention_interval: Annotated[int, Field(ge=0)] | Literal["auto"] | None = "auto"
    # vLLM --tensor-parallel-size and --enable-expert-parallel: a replica of this many
    # GPUs (`twin/model/parallel`); 1 and False: one card, as before
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    enable_expert_parallel: bool = False
    spec_max_num_batched_tokens: int = Field(default=2048, gt=0)   # budget with spec on
    #                                                      unless max_num_batched_tokens is set
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("vllm_version")
    @classmethod
    def _version_ok(cls, v: str) -> str:
        try:
            vllm_versions.parse_version(v)
        except InputError as exc:
            raise ValueError(str(exc).removeprefix("vllm_version: ")) from None
        return v

    @field_validator("spec")
    @classmethod
    def _spec_ok(cls, v: str) -> str:
        if not _SPEC_RE.match(v):
            raise ValueError(f"must be 'off', 'ngram:K', 'draft:K' or 'mtp:K' (each optionally "
                             f"'@N', the batch gate), got {v!r}")
        parse_spec(v)       # the bound on K (vLLM: at most 32 draft tokens per request)
        return v


class SpecTerms(_Strict):
    """Speculation terms a card has of its own while it borrows the rest of its
    efficiency from the default card's fit (`efficiency_for`); each with the source."""

    spec_step_s: float | None = Field(default=None, ge=0)
    spec_seq_s: float | None = Field(default=None, ge=0)
    spec_req_s: float | None = Field(default=None, ge=0)
    penalty_row_s: float | None = Field(default=None, ge=0)
    penalty_pad_tok_s: float | None = Field(default=None, ge=0)
    topk_row_s: float | None = Field(default=None, ge=0)
    ngram_ctx_tok_s: float | None = Field(default=None, ge=0)
    piecewise_step_s: float | None = Field(default=None, ge=0)
    eager_step_s: float | None = Field(default=None, ge=0)
    source: str

    def own(self) -> dict[str, float]:
        """The terms this card sets."""
        return {k: v for k, v in self.model_dump(exclude={"source"}).items()
                if v is not None}


class HostLink(_Strict):
    """The card's path to host memory, for a KV offload tier (`--kv-offload-gib`):
    sustained pinned-copy bandwidth per direction and a fixed cost per transfer job."""

    kind: str                              # "pcie4x16", "pcie5x16", "nvlink-c2c", "unified"
    h2d_bytes_s: float = Field(gt=0)       # host → device (a load)
    d2h_bytes_s: float = Field(gt=0)       # device → host (a store)
    latency_s: float = Field(ge=0)         # per transfer job (launch + DMA setup)
    source: str


class KVLink(_Strict):
    """A path a prefill instance's KV takes to a decode instance (disaggregated serving,
    `twin/pd`): sustained one-direction bandwidth of an RDMA/P2P read and a fixed cost
    per transfer (the connector's descriptor set-up, post and completion notification)."""

    bytes_s: float = Field(gt=0)
    latency_s: float = Field(ge=0)
    source: str


class TPLink(_Strict):
    """The links between the GPUs of one tensor-parallel group (`twin/model/parallel`):
    what vLLM's custom all-reduce (peer reads over P2P) and NCCL's ring sustain, and
    their fixed cost per call. A card without one serves TP 1 only."""

    kind: str                              # "nvswitch", "nvlink-bridge", "pcie"
    fully_connected: bool                  # every GPU pair on NVLink (vLLM's is_fully_connected)
    max_gpus: int = Field(ge=1)            # GPUs on one such domain (one node)
    p2p_bytes_s: float = Field(gt=0)       # one GPU reading its peers (custom all-reduce)
    custom_latency_s: float = Field(ge=0)  # one custom all-reduce kernel, tiny message
    nccl_bus_bytes_s: float = Field(gt=0)  # NCCL all-reduce bus bandwidth (nccl-tests busbw)
    nccl_latency_s: float = Field(ge=0)    # one NCCL all-reduce, tiny message
    source: str


class VllmMemory(_Strict):
    """The card's figures for the memory vLLM keeps out of the KV cache (`memory`): a card
    with this block sizes its KV pool by vLLM's own accounting, term by term, instead of
    the fitted `reserve_bytes` alone (which stays as a residual on top where fitted)."""

    cuda_total_bytes: int = Field(gt=0)    # what cudaMemGetInfo reports as total
    cuda_total_source: str
    non_torch_bytes: float = Field(ge=0)   # allocated outside torch while profiling
    non_torch_source: str


class HardwareProfile(_Strict):
    name: str
    description: str = ""
    memory_bytes: int = Field(gt=0)
    bandwidth_bytes_s: float = Field(gt=0)
    tflops: dict[str, float]               # dense tensor TFLOPS by dtype
    usd_per_hour: float = Field(ge=0)
    kv_cache_bytes: int | None = None      # fixed KV pool (vLLM CPU) instead of utilisation
    efficiency: Efficiency | None = None
    # the kernel family its `efficiency` was fitted on (`kernel_family`); None: not said
    efficiency_family: str | None = None
    speculation: SpecTerms | None = None   # own speculation terms of a borrowing card
    # issue 56: terms fitted on this card (over the borrowed `efficiency`), and per
    # kernel family (`kernel_family`) the family's terms fitted on this card
    card_terms: CardTerms | None = None
    families: dict[str, FamilyTerms] = Field(default_factory=dict)
    # CUDA compute capability (major, minor): picks vLLM's attention backend and CUDA-graph
    # behaviour under speculation (`execution`); None: not a CUDA card (no graphs modelled)
    compute_capability: tuple[int, int] | None = None
    host_link: HostLink | None = None      # for a host KV tier; None: the card has none modelled
    # card-to-card links for P/D KV transfer, by kind (nvlink, infiniband, roce, pcie)
    kv_links: dict[str, KVLink] = Field(default_factory=dict)
    tp_link: TPLink | None = None          # between the GPUs of a TP group; None: TP 1 only
    # issue 56: vLLM's start-up memory accounting (`twin/model/memory`); None: the KV pool
    # is utilisation × memory − weights − reserve_bytes, as fitted
    memory: VllmMemory | None = None
    engine: dict[str, object] = Field(default_factory=dict)   # overrides of engine.yaml
    sources: dict[str, str]

    def peak_flops(self, dtypes: list[str]) -> float:
        """Dense FLOP/s at the first of `dtypes` this card supports (bf16 fallback)."""
        for d in [*dtypes, "bf16", "fp16", "fp32"]:
            if d in self.tflops:
                return self.tflops[d] * 1e12
        raise InputError(f"hardware {self.name}: no usable dtype in tflops")


class Layers(_Strict):
    full_attention: int = Field(ge=0)
    linear_attention: int = Field(ge=0)
    sliding_attention: int = Field(ge=0)


class Params(_Strict):
    total: float = Field(gt=0)
    active: float = Field(gt=0)
    embedding: float = Field(ge=0)     # input embedding: gathered, not streamed
    lm_head: float = Field(ge=0)       # read every step
    dense_other: float = Field(ge=0)   # attention, norms, routers, shared experts, dense MLPs


class Experts(_Strict):
    total: int = Field(gt=0)
    active: int = Field(gt=0)
    moe_layers: int = Field(gt=0)
    params_per_expert: float = Field(gt=0)
    ffn_dim: int = Field(gt=0)

    @property
    def routed_active(self) -> float:
        """Expert parameters one token goes through: `active` experts in every MoE layer."""
        return self.active * self.moe_layers * self.params_per_expert


class Quantization(_Strict):
    expert_bytes_per_param: float = Field(gt=0)
    dense_bytes_per_param: float = Field(gt=0)
    head_bytes_per_param: float = Field(gt=0)
    checkpoint_bytes: float | None = None
    compute_dtypes: list[str]
    source: str


class Drafter(_Strict):
    """A draft model or MTP head (`--spec draft:K` / `mtp:K`): its per-pass cost and the
    target's acceptance per draft position (conditional: P(i accepted | i−1 accepted))."""

    bytes_per_pass: float = Field(ge=0)      # weights the drafter reads each pass
    params_active: float = Field(ge=0)       # FLOPs per token = 2 × this
    acceptance: list[float]                  # per position, 0..1; last value repeats
    source: str

    @field_validator("acceptance")
    @classmethod
    def _probs(cls, v: list[float]) -> list[float]:
        if not v or any(not 0.0 <= p <= 1.0 for p in v):
            raise ValueError("acceptance: a non-empty list of probabilities in 0..1")
        return v


class GenerationConfig(_Strict):
    """The sampling defaults vLLM's `--generation-config auto` (its default) reads from
    the model's `generation_config.json` and applies to every request that does not set
    them (`ModelConfig.get_diff_sampling_param`: repetition_penalty, temperature, top_k,
    top_p; min_p and max_new_tokens are not modelled). None: the file does not set it
    (vLLM's neutral value applies). Bounded as a scenario's `sampling` is
    (`scenario.model.SamplingSpec`, which gives each bound's reason), finite: an
    infinite penalty was accepted and wrote `Infinity`, not JSON, into a manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1, le=1 << 20)
    repetition_penalty: float | None = Field(default=None, gt=0, le=10)
    source: str

    def values(self) -> dict[str, float | int]:
        """The fields the file sets, by vLLM's names."""
        return {k: v for k, v in self.model_dump(exclude={"source"}).items()
                if v is not None}


class ModelProfile(_Strict):
    name: str
    description: str = ""
    hf_config: str = ""
    layers: Layers
    sliding_window: int = 0
    hidden_size: int = Field(gt=0)
    num_q_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    kv_bytes_per_token_bf16: float = Field(gt=0)
    # the longest sequence the model serves (config.json `max_position_embeddings`, or
    # what the model card states); None: `twin.config.DEFAULT_CONTEXT_LENGTH`
    context_length: int | None = Field(default=None, gt=0)
    attn_flops_per_pair: float | None = None
    recurrent_state_bytes_per_layer: float = 0.0   # per linear-attention layer, per sequence
    # hybrids' prefill (`twin.hybrid_prefill`): the chunked linear-attention kernels'
    # FLOPs and bytes per prefill token (all linear layers), and FLOPs per cached-context
    # token per prefill chunk (MLA expands its cached latents through kv_b_proj)
    linear_attn_flops_per_token: float = Field(default=0.0, ge=0)
    linear_attn_bytes_per_token: float = Field(default=0.0, ge=0)
    context_flops_per_token: float = Field(default=0.0, ge=0)
    params: Params
    experts: Experts | None = None
    quantization: str
    quantizations: dict[str, Quantization]
    sources: dict[str, str]
    # speculation: drafters by kind ("draft", "mtp"), and whether the model's attention
    # backend runs without CUDA graphs once drafts make decode batches non-uniform
    drafters: dict[str, Drafter] = Field(default_factory=dict)
    spec_disables_cuda_graphs: bool = False
    # "mla": multi-head latent attention (one shared latent per token): vLLM picks an MLA
    # backend for it (`execution.attention_backend`)
    attention_kind: Literal["mha", "mla"] = "mha"
    kv_dtype_default: KvDtype | None = None   # what vLLM's `--kv-cache-dtype auto` picks
    #                                           for this model when not the engine default
    # the sampling defaults of the model's generation_config.json (vLLM applies them to
    # requests that leave a field unset); None: the profile states none (vLLM's neutral)
    generation_config: GenerationConfig | None = None
    # the generated token whose chunk first carries text on vLLM's chat stream: a client
    # that times the first text (AIPerf, GuideLLM, many scripts) times this one (gpt-oss:
    # 4, its harmony header `<|channel|>analysis<|message|>` streams none); 1 for most
    chat_first_text_token: int = Field(default=1, ge=1, le=64, strict=True)

    @model_validator(mode="after")
    def _active_adds_up(self) -> ModelProfile:
        """`params.active` must be the dense layers + the routed experts a token activates
        + the LM head (an MoE's model card), or that + the input embedding (a dense model's
        total), within 1%: the twin prices compute from those parts, so a profile whose
        figures disagree is refused rather than priced from one of them."""
        p = self.params
        parts = self.gemm_params + p.lm_head
        if not any(abs(p.active - want) <= 0.01 * p.active
                   for want in (parts, parts + p.embedding)):
            raise ValueError(
                f"params.active {p.active:.6g} is neither dense_other + routed experts + "
                f"lm_head ({parts:.6g}) nor that + embedding ({parts + p.embedding:.6g}), "
                "within 1%")
        return self

    @property
    def gemm_params(self) -> float:
        """Parameters a token goes through as GEMMs, the LM head apart: the dense layers and
        the routed experts it activates. Not `params.active` less the head: the input
        embedding is a gather (no FLOPs), and a dense profile's `active` counts it (its
        total) where an MoE's, as its model card gives it, does not."""
        routed = self.experts.routed_active if self.experts is not None else 0.0
        return self.params.dense_other + routed

    @property
    def hidden_opening(self) -> int:
        """Tokens that open every chat reply and stream no text (gpt-oss: 3)."""
        return self.chat_first_text_token - 1

    @property
    def is_hybrid(self) -> bool:
        return self.layers.linear_attention > 0

    def quant(self, name: str | None = None) -> Quantization:
        key = name or self.quantization
        if key not in self.quantizations:
            raise InputError(f"model {self.name}: unknown quantization {key!r} "
                             f"(known: {', '.join(sorted(self.quantizations))})")
        return self.quantizations[key]


# numbers that need their source only when set past their default (the plain case): the
# hybrids' prefill terms (0) and where a chat stream's first text comes (token 1)
_SOURCED_WHEN_SET: dict[str, float] = {
    "linear_attn_flops_per_token": 0, "linear_attn_bytes_per_token": 0,
    "context_flops_per_token": 0, "chat_first_text_token": 1}


def _numeric_fields(model: BaseModel) -> list[str]:
    skip = {"efficiency", "efficiency_family", "card_terms", "families", "engine",
            "host_link", "kv_links", "tp_link", "memory", "sources", "speculation",
            "quantizations", "sliding_window", "drafters", "spec_disables_cuda_graphs",
            "kv_dtype_default", "generation_config",
            "attn_flops_per_pair", "kv_cache_bytes", "recurrent_state_bytes_per_layer"}
    return [k for k, v in model if k not in skip and not isinstance(v, str) and v is not None
            and not (k in _SOURCED_WHEN_SET and v == _SOURCED_WHEN_SET[k])]


def _check_sources(profile: BaseModel, sources: dict[str, str], where: str) -> None:
    """Each number must say where it comes from (a `sources` entry per field)."""
    missing = [k for k in _numeric_fields(profile) if k not in sources]
    if missing:
        raise InputError(f"{where}: sources: missing a source note for {', '.join(missing)}")


# Parsed profiles by their text: a run loads the same few files many times and the
# pure-Python YAML parser takes ~3 ms a file; callers get a copy they may change.
_PARSED: dict[str, dict[str, object]] = {}


MAX_PROFILE_BYTES = 1 << 20     # a shipped profile is ~5 KB


def _read_yaml(path: Path) -> dict[str, object]:
    """A profile's YAML mapping; a FIFO, a device, a file over MAX_PROFILE_BYTES, bytes
    that are not UTF-8 or YAML nested past the parser's depth are one InputError line."""
    text = text_file(path, "profile", MAX_PROFILE_BYTES, refusal=": not a profile")
    try:
        if text in _PARSED:
            return copy.deepcopy(_PARSED[text])
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    except ValueError as exc:           # an integer past the int parser's digit limit
        raise InputError(f"{path}: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: YAML nested too deeply: not a profile") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a profile must be a YAML mapping")
    if len(_PARSED) > 256:
        _PARSED.clear()
    _PARSED[text] = copy.deepcopy(data)
    return data


def _validate(cls: type[_M], data: Mapping[str, object], where: Path | str) -> _M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InputError(f"{where}: {loc + ': ' if loc else ''}{msg}") from exc


def known_names(kind: Literal["hardware", "models"]) -> list[str]:
    """Names of the profiles shipped in `profiles/<kind>/`."""
    return sorted(p.stem for p in (PROFILE_DIR / kind).glob("*.yaml"))


def _resolve(name_or_path: str | Path, kind: Literal["hardware", "models"]) -> Path:
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or "/" in text or "\\" in text:
        path = Path(text)
        if not path.is_file():
            raise InputError(f"{text}: {kind} profile file not found")
        return path
    path = PROFILE_DIR / kind / f"{text}.yaml"
    if not path.is_file():
        label = "hardware" if kind == "hardware" else "model"
        raise InputError(f"unknown {label} {text!r} (known: {', '.join(known_names(kind))}; "
                         f"or give a path to a YAML profile)")
    return path


def load_hardware(name_or_path: str | Path) -> HardwareProfile:
    """A shipped card by name (`a40`, `h100` …) or a user's YAML file by path."""
    path = _resolve(name_or_path, "hardware")
    hw = _validate(HardwareProfile, _read_yaml(path), path)
    _check_sources(hw, hw.sources, str(path))
    return hw


def load_model(name_or_path: str | Path) -> ModelProfile:
    """A shipped model by name (`qwen3-coder-30b-a3b-awq` …) or a user's YAML file."""
    path = _resolve(name_or_path, "models")
    model = _validate(ModelProfile, _read_yaml(path), path)
    _check_sources(model, model.sources, str(path))
    return model


def load_engine_settings(hardware: HardwareProfile | None = None,
                         overrides: Mapping[str, object] | None = None) -> EngineSettings:
    """engine.yaml defaults < the card's `engine:` section < explicit overrides, with
    the "auto" settings resolved for the vLLM version (`with_version_defaults`)."""
    path = PROFILE_DIR / "engine.yaml"
    data = _read_yaml(path)
    if hardware is not None:
        data.update(hardware.engine)
    data.update(overrides or {})
    return with_version_defaults(_validate(EngineSettings, data, "engine settings"))


def with_version_defaults(engine: EngineSettings) -> EngineSettings:
    """`engine` with its "auto" settings resolved for its `vllm_version`: the hybrids'
    state retention that release uses by default for this speculation setting."""
    if engine.prefix_cache_retention_interval != "auto":
        return engine
    spec = parse_spec(engine.spec)
    eagle = isinstance(spec, ModelDraftSpec) and spec.kind == "mtp"
    d = vllm_versions.retention_default(engine.vllm_version, eagle_drafter=eagle)
    return engine.model_copy(update={"prefix_cache_retention_interval": d.interval})


ESTIMATE = "estimate: "     # how a label starts when a term is borrowed


def efficiency_for(hardware: HardwareProfile,
                   family: str | None = None) -> tuple[Efficiency, str]:
    """The terms a twin of this card runs with, and a label naming where each part comes
    from; a label that starts "estimate: " says card or kernel terms are borrowed.

    Base: the card's `efficiency`, else the default card's fit with the card's own
    speculation terms over it. Over the base: the card's `card_terms`, then the terms of
    `family` (`kernel_family`): fitted on this card, else the same family on the default
    card, else the base's own (borrowed from the family the base was fitted on)."""
    if hardware.efficiency is not None:
        eff, source = hardware.efficiency, hardware.efficiency.source
        fitted_on, base_family = hardware.name, hardware.efficiency_family
    else:
        default_hw = load_hardware(DEFAULT_EFFICIENCY_HARDWARE)
        assert default_hw.efficiency is not None, "the default card must carry a fit"
        eff, fitted_on = default_hw.efficiency, DEFAULT_EFFICIENCY_HARDWARE
        base_family = default_hw.efficiency_family
        source = f"the {DEFAULT_EFFICIENCY_HARDWARE} fit ({eff.source})"
        own = hardware.speculation.own() if hardware.speculation is not None else {}
        if own:
            eff = eff.model_copy(update=own)
            source += (f"; its own speculation terms {', '.join(sorted(own))} "
                       f"({hardware.speculation.source if hardware.speculation else ''})")
    borrowed: list[str] = []
    fitted: list[str] = []
    if hardware.efficiency is None:
        card = hardware.card_terms
        derived = _reserve_derived(hardware)
        if derived:
            # the default card's reserve holds its own start-up memory; this card's is
            # vLLM's accounting (`memory`), with no residual fitted on top
            eff = eff.model_copy(update={"reserve_bytes": 0.0})
        if card is None:
            borrowed.append(f"terms borrowed from {source}")
        else:
            eff = eff.model_copy(update=card.own())
            fitted.append(f"card terms {', '.join(card.own())} fitted on {hardware.name} "
                          f"({card.source})")
            rest = [t for t in CARD_TERMS if t not in card.own()
                    and not (derived and t == "reserve_bytes")]
            if rest:
                borrowed.append(f"card terms {', '.join(rest)} borrowed from "
                                f"the {DEFAULT_EFFICIENCY_HARDWARE} fit")
            fitted.append(f"speculation and other terms from {source}")
    if family is not None:
        fam, where = _family_terms(hardware, family)
        if fam is not None:
            eff = eff.model_copy(update=fam.own())
            line = f"{family} kernel terms {', '.join(fam.own())}"
            if where == hardware.name:
                fitted.insert(0, f"{line} fitted on {where} ({fam.source})")
            else:
                borrowed.insert(0, f"{line} borrowed from the {where} fit ({fam.source})")
        elif family == base_family or (base_family is None and fitted_on == hardware.name):
            if fitted_on != hardware.name and hardware.card_terms is not None:
                borrowed.insert(0, f"{family} kernel terms borrowed from the {fitted_on} fit")
        else:
            borrowed.insert(0, f"{family} kernel terms borrowed from the {fitted_on} "
                               f"{base_family or 'card'} fit")
    if not fitted and not borrowed:
        return eff, source
    if hardware.efficiency is not None:
        fitted.append(source)
    if borrowed:
        return eff, f"{ESTIMATE}{'; '.join([*borrowed, *fitted])}"
    return eff, "; ".join(fitted)


def _reserve_derived(hardware: HardwareProfile) -> bool:
    """Whether the card's non-KV memory is vLLM's accounting with no fitted residual:
    a `memory` block and no reserve_bytes of its own."""
    if hardware.memory is None or hardware.efficiency is not None:
        return False
    card = hardware.card_terms
    return card is None or card.reserve_bytes is None


def _family_terms(hardware: HardwareProfile, family: str) -> tuple[FamilyTerms | None, str]:
    """The family's terms fitted on this card, else on the default card (None: neither;
    the default card's own fit is the base already)."""
    if family in hardware.families:
        return hardware.families[family], hardware.name
    if hardware.name != DEFAULT_EFFICIENCY_HARDWARE:
        default_hw = load_hardware(DEFAULT_EFFICIENCY_HARDWARE)
        if family in default_hw.families:
            return default_hw.families[family], DEFAULT_EFFICIENCY_HARDWARE
    return None, ""


DEFAULT_TWIN = "a40/qwen3-coder-30b-a3b-awq"   # the twin a scenario without one runs on


def _split_profile_paths(value: str) -> tuple[str, str] | None:
    """HARDWARE/MODEL where either side is a YAML profile path: split after the first
    `.yaml/` or `.yml/` (a hardware path), else at the first `/` (a hardware name)."""
    for ext in (".yaml/", ".yml/"):
        i = value.find(ext)
        if i > 0:
            return value[:i + len(ext) - 1], value[i + len(ext):]
    if value.endswith((".yaml", ".yml")) and "/" in value:
        hw, _, model = value.partition("/")
        return hw, model
    return None


def parse_twin(value: str, option: str = "--twin") -> tuple[str, str]:
    """`--twin HARDWARE/MODEL` (names or YAML profile paths) → (hardware, model);
    `option` is the option the user typed, named in the refusal."""
    paths = _split_profile_paths(value)
    if paths is not None and all(paths):
        return paths
    if value.count("/") != 1 or not all(value.split("/")):
        raise InputError(f"{option} must look like HARDWARE/MODEL (e.g. {DEFAULT_TWIN}), "
                         f"got {value!r}")
    hw, model = value.split("/")
    return hw, model
