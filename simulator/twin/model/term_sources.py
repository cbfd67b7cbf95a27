"""Where each roofline term of a twin comes from, per card and kernel family (issue 56):
what `endurance twin show` lists beside the speculation terms. Pure: profiles in, rows out.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.twin.model.profiles import (
    CARD_TERMS,
    DEFAULT_EFFICIENCY_HARDWARE,
    FAMILY_TERMS,
    HardwareProfile,
    efficiency_for,
    load_hardware,
)


@dataclass(frozen=True, slots=True)
class TermSource:
    term: str
    kind: str            # "card" or "family FAMILY"
    value: float
    source: str          # "fitted on CARD", "borrowed from …"


def term_sources(hw: HardwareProfile, family: str) -> list[TermSource]:
    """The card terms and `family`'s kernel terms of a twin on `hw`, each with its source."""
    eff, _ = efficiency_for(hw, family)
    values = eff.model_dump()
    default = load_hardware(DEFAULT_EFFICIENCY_HARDWARE)
    own_card = hw.card_terms.own() if hw.card_terms is not None else {}
    fam = hw.families.get(family)
    own_fam = fam.own() if fam is not None else {}
    a40_fam = default.families.get(family)
    out: list[TermSource] = []
    for t in CARD_TERMS:
        if t in own_card:
            src = f"fitted on {hw.name}"
        elif t == "reserve_bytes" and hw.memory is not None and hw.efficiency is None:
            src = "residual over vLLM's memory terms (`memory`): none fitted"
        elif hw.efficiency is not None:
            src = f"{hw.name}'s own fit"
        else:
            src = f"borrowed from the {DEFAULT_EFFICIENCY_HARDWARE} fit"
        out.append(TermSource(t, "card", float(values[t]), src))
    for t in FAMILY_TERMS:
        if t in own_fam:
            src = f"fitted on {hw.name}"
        elif hw.efficiency is not None and hw.efficiency_family in (None, family):
            src = f"{hw.name}'s own fit"
        elif a40_fam is not None and t in a40_fam.own():
            src = f"borrowed from the {DEFAULT_EFFICIENCY_HARDWARE} {family} fit"
        else:
            base = hw if hw.efficiency is not None else default
            src = (f"borrowed from the {base.name} {base.efficiency_family or 'card'} fit"
                   + ("" if base.efficiency_family == family else " (another family)"))
        out.append(TermSource(t, f"family {family}", float(values[t]), src))
    return out
