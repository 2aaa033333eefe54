"""The zoo's profiles by name: the built-in ones (``full``, ``tiny``: :mod:`hynea_pl.zoo.mnist.profiles`) and those
trained from a folder of the user's images (``zoo build --data PATH --name NAME``: :mod:`hynea_pl.zoo.folder`)."""

from __future__ import annotations

from hynea_pl.zoo.folder import folder_profile, folder_profile_names
from hynea_pl.zoo.labelled.config import ZooProfile
from hynea_pl.zoo.mnist.profiles import PROFILES


def get_profile(name: str) -> ZooProfile:
    """The named profile: a built-in one, or one built from a folder; a one-line error lists the valid names."""
    if name in PROFILES:
        return PROFILES[name]
    profile = folder_profile(name)
    if profile is None:
        raise ValueError(f"unknown zoo profile {name!r}; choose one of {sorted(PROFILES) + folder_profile_names()} "
                         "(a profile of your own images: python -m hynea_pl zoo build --data PATH --name NAME)")
    return profile


__all__ = ["PROFILES", "ZooProfile", "get_profile"]
