"""A card profile from a fit (`endurance twin fit … --out card.yaml`): the base card's
profile with the terms the twin ran the fit with — the fitted ones and the rest as the
base had them — written as the card's own `efficiency`, and the kernel family's terms
under `families`, so `--twin card.yaml/MODEL` runs on exactly the fitted model and
`twin show` says where each part came from. Pure: data in, plain data out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulator.twin.model.profiles import FAMILY_TERMS, Efficiency, HardwareProfile


def fitted_card(hw: HardwareProfile, name: str, family: str, terms: Mapping[str, float],
                free: Sequence[str], source: str) -> dict[str, object]:
    """`hw` as plain profile data named `name`, its efficiency set to `terms` (every
    Efficiency term the fit ran with; `free` were fitted, the rest kept from the base)
    and its `family` terms to theirs; the card's borrowed-term fields (`card_terms`,
    `speculation`) are folded into `efficiency` already, so they are dropped."""
    fields = set(Efficiency.model_fields) - {"source"}
    kept = sorted(t for t in fields if t in terms and t not in free)
    note = (f"{source}: {', '.join(free)} fitted; {', '.join(kept)} as the base card's "
            f"terms the fit started from")
    eff = Efficiency.model_validate({**{k: v for k, v in terms.items() if k in fields},
                                     "source": note})
    data = hw.model_dump(mode="json", exclude_none=True)
    data.update(name=name, efficiency=eff.model_dump(mode="json", exclude_none=True),
                efficiency_family=family)
    data.pop("card_terms", None)
    data.pop("speculation", None)
    families = dict(data.get("families") or {})
    families[family] = {**{t: terms[t] for t in FAMILY_TERMS if t in terms},
                        "source": note}
    data["families"] = families
    data["description"] = (f"{hw.description or hw.name}, terms fitted by `endurance twin "
                           f"fit` (efficiency.source says to what)")
    return data
