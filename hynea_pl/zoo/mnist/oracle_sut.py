"""The zoo's validity oracle as a SUT-like model for a campaign's ``oracle`` section or a method's ``reference``."""

from __future__ import annotations

from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT


class ZooOracle(EnsembleClassifierSUT):
    """The zoo's oracle members of one role, voting by mean probability (built on first use, like every zoo model).

    Args:
        profile: zoo profile (``full``, ``tiny``).
        role: ``judges`` (``oracle-1``, ``oracle-2``, ``judge-convmixer``, ``judge-knn``: three families; they
            give the verdicts, unanimously, and never steer) or ``steering`` (``steer-cnn``: a method may use it in
            its loss or stop rule).
        members: a subset of the role's members (default: all of them).
    """

    def __init__(self, profile: str = "full", role: str = "judges", members: list[str] | None = None) -> None:
        from hynea_pl.zoo.mnist.zoo import load_zoo

        zoo = load_zoo(profile)
        roles = zoo.oracle_names()
        if role not in roles:
            raise ValueError(f"unknown oracle role {role!r}; choose one of {sorted(roles)}")
        names = list(members) if members is not None else roles[role]
        unknown = [name for name in names if name not in roles[role]]
        if unknown or not names:
            raise ValueError(f"oracle members {unknown or names} are not {role} members; choose from {roles[role]}")
        super().__init__([ClassifierSUT(zoo.oracle(name)) for name in names], names)
        self.profile, self.role = profile, role
