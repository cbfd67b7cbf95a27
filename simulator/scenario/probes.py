"""The `probes:` section of a scenario: planted facts and the recall probes asked about
them (issue 22). Absent means off: no fact is planted and no probe is sent.

Facts: `facts` are drawn per session (kinds taken in turn from `kinds`, each at a
seeded turn in the `plant_between` fraction of the session), plus the chosen ones in
`plant`. Each is planted at the first turn at or after its planned turn that can carry
its kind (a user prompt, a file read, any reply, an Edit call). Probes: after the turns
in `at_turns` and every `every_turns` turns, after every turn that followed a compaction
(`after_compaction`) and after the last turn (`at_end`), one question per fact planted so
far.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from simulator.protocol.facts import FACT_KINDS, FactKind

MAX_FACTS = 40          # per session: the size of the key pool (keys are unique per session)

_Int = Annotated[int, Strict()]      # YAML `yes` is not a number


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class PlantSpec(_Frozen):
    """One chosen fact: its kind and the turn it is planned for."""

    kind: FactKind
    turn: _Int = Field(ge=0, le=1_000_000)


class ProbesSpec(_Frozen):
    facts: _Int = Field(default=8, ge=0, le=MAX_FACTS)
    kinds: tuple[FactKind, ...] = FACT_KINDS
    plant_between: tuple[float, float] = (0.0, 0.8)
    plant: tuple[PlantSpec, ...] = ()
    at_turns: tuple[_Int, ...] = ()
    every_turns: _Int | None = Field(default=None, ge=1, le=1_000_000)
    after_compaction: bool = True
    at_end: bool = True
    max_tokens: _Int = Field(default=32, ge=1, le=4096)
    temperature: float | None = Field(default=0.0, ge=0, le=2)

    @model_validator(mode="after")
    def _check(self) -> ProbesSpec:
        lo, hi = self.plant_between
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"plant_between: need 0 <= low <= high <= 1, got [{lo}, {hi}]")
        if not self.kinds:
            raise ValueError("kinds: at least one fact kind")
        if self.facts + len(self.plant) > MAX_FACTS:
            raise ValueError(f"at most {MAX_FACTS} facts per session "
                             f"(facts + plant = {self.facts + len(self.plant)})")
        if any(t < 0 for t in self.at_turns):
            raise ValueError("at_turns: turns are >= 0")
        return self
