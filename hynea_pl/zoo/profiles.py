"""The zoo's profiles by name, from every registered source: the built-in ones (``full``, ``tiny``:
:mod:`hynea_pl.zoo.mnist.profiles`) and those trained from a folder of the user's images (``zoo build --data PATH
--name NAME``: :mod:`hynea_pl.zoo.folder`). Each source registers itself (:func:`register_profile_source`) when
:mod:`hynea_pl.zoo` is imported, so the shared zoo code looks a profile up here without knowing any data source."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: ``(find(name) -> profile or None, names() -> the source's profile names)``, in the order registered
_SOURCES: list[tuple[Callable[[str], Any], Callable[[], Iterable[str]]]] = []


def register_profile_source(find: Callable[[str], Any], names: Callable[[], Iterable[str]]) -> None:
    """Add a source of profiles: ``find(name)`` gives its :class:`~hynea_pl.zoo.labelled.config.ZooProfile` of that
    name or ``None``; ``names()`` lists them (for error messages). An earlier source wins a name."""
    _SOURCES.append((find, names))


def profile_names() -> list[str]:
    """Every usable profile name, source by source."""
    return [name for _, names in _SOURCES for name in names()]


def get_profile(name: str) -> Any:
    """The :class:`~hynea_pl.zoo.labelled.config.ZooProfile` named ``name``; a one-line error lists the valid names."""
    for find, _ in _SOURCES:
        profile = find(name)
        if profile is not None:
            return profile
    raise ValueError(f"unknown zoo profile {name!r}; choose one of {profile_names()} "
                     "(a profile of your own images: python -m hynea_pl zoo build --data PATH --name NAME)")


__all__ = ["get_profile", "profile_names", "register_profile_source"]
