"""The zoo's validity oracle as a SUT-like model for a campaign's ``oracle`` section or a method's ``reference``."""

from __future__ import annotations

from torch import nn

from hynea_pl.suts import EnsembleClassifierSUT
from hynea_pl.verdicts import VERDICT_CEILING


class ZooOracle(EnsembleClassifierSUT):
    """The zoo's oracle members of one role, voting by mean probability (built on first use, like every zoo model).

    Args:
        profile: zoo profile (``full``, ``tiny``).
        role: ``judges`` (``oracle-1``, ``oracle-2``, ``judge-convmixer``: two families that read like people; they
            give the verdicts as a panel, by the profile's calibrated vote, and never steer) or ``steering``
            (``steer-cnn``: a method may use it in its loss or stop rule).
        members: a subset of the role's members (default: all of them).
    """

    def __init__(self, profile: str = "full", role: str = "judges", members: list[str] | None = None) -> None:
        from hynea_pl.zoo.labelled.zoo import load_zoo

        zoo = load_zoo(profile)
        roles = zoo.oracle_names()
        if role not in roles:
            raise ValueError(f"unknown oracle role {role!r}; choose one of {sorted(roles)}")
        names = list(members) if members is not None else roles[role]
        unknown = [name for name in names if name not in roles[role]]
        if unknown or not names:
            raise ValueError(f"oracle members {unknown or names} are not {role} members; choose from {roles[role]}")
        super().__init__(**zoo.panel_args(names, role))
        self.profile, self.role = profile, role
        self.all_members = names == roles[role]

    def verdict_ceiling(self, realism: nn.Module | None) -> float | None:
        """The zoo's ``verdict_ceiling`` gate (its valid rate on the MNIST test digits), when this oracle is its
        judges, all of them, and the verdict is as that gate measured it: the judges' "not a digit" answer as its
        realism part (any ``realism`` test is then only recorded), or else the zoo's realism test."""
        from hynea_pl.zoo.labelled.realism import REALISM_K, REALISM_QUANTILE, ZooTypicality
        from hynea_pl.zoo.labelled.zoo import load_zoo

        measured_with = self.reads_no_class or (
            isinstance(realism, ZooTypicality) and realism.profile == self.profile and realism.reference_size is None
            and (realism.k, realism.quantile) == (REALISM_K, REALISM_QUANTILE))
        if self.role != "judges" or not self.all_members or not measured_with:
            return None
        return {g["name"]: g["value"] for g in load_zoo(self.profile).quality["gates"]}.get(VERDICT_CEILING)
