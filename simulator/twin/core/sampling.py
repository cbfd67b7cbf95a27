"""The sampling parameters a request carries, as the twin's engine sees them.

Why the twin needs them: vLLM's sampler and rejection sampler do host work per draft
row only when a request in the batch uses a penalty (`ops/penalties.py` through
`RejectionSampler.apply_logits_processors`) or top-k/top-p (`apply_top_k_top_p`), so
what a request carries changes what speculation costs. `None` on a field means the
request did not say; the serving side resolves it (the model's generation config, as
vLLM's `--generation-config auto` applies it) before the engine sees it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """vLLM's neutral values: temperature 1, top_p 1, top_k 0 (or -1: off), penalties
    1 (repetition) and 0 (frequency, presence)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    @property
    def greedy(self) -> bool:
        """vLLM samples greedily at temperature 0 (and then skips top-k/top-p)."""
        return self.temperature == 0.0

    @property
    def penalties_active(self) -> bool:
        """Any penalty that makes vLLM build the output-token history tensors."""
        return (self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0
                or self.presence_penalty != 0.0)

    @property
    def top_k_top_p_active(self) -> bool:
        """A top-k or top-p cut that vLLM applies (not under greedy sampling)."""
        return not self.greedy and (self.top_k > 0 or self.top_p < 1.0)


NEUTRAL = SamplingParams()
