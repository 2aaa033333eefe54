"""The zoo's validity oracle as a SUT-like model for a campaign's ``oracle`` section or a method's ``reference``."""

from __future__ import annotations

from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT


class ZooOracle(EnsembleClassifierSUT):
    """The zoo's oracle members of one role, voting by mean probability (built on first use, like every zoo model).

    Args:
        profile: zoo profile (``full``, ``tiny``).
        role: ``judges`` (``oracle-1``, ``oracle-2``: they give the verdicts and never steer) or ``steering``
            (``oracle-0``: a method may use it in its loss or stop rule).
    """

    def __init__(self, profile: str = "full", role: str = "judges") -> None:
        from hynea_pl.zoo import load_zoo

        zoo = load_zoo(profile)
        roles = zoo.oracle_names()
        if role not in roles:
            raise ValueError(f"unknown oracle role {role!r}; choose one of {sorted(roles)}")
        super().__init__([ClassifierSUT(zoo.oracle(name)) for name in roles[role]])
        self.profile, self.role, self.member_names = profile, role, list(roles[role])
