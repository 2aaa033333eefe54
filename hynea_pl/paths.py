"""Resolve user-given model locations: local paths (``~`` expanded) and ``<scheme>://...`` URIs.

This module imports nothing of the package: URI schemes (e.g. ``zoo://``, registered by :mod:`hynea_pl`) are
added with :func:`register_scheme`, so that model loaders can depend on it without depending on the zoo.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

#: ``scheme -> resolver(uri) -> local path``; filled by :func:`register_scheme`.
_SCHEMES: dict[str, Callable[[str], Path]] = {}


def register_scheme(name: str, resolver: Callable[[str], Path]) -> None:
    """Resolve locations ``<name>://...`` with ``resolver`` (given the whole URI); a later call replaces it."""
    if not name or "://" in name:
        raise ValueError(f"invalid URI scheme {name!r}")
    _SCHEMES[name] = resolver


def registered_schemes() -> list[str]:
    """The names of the registered URI schemes."""
    return sorted(_SCHEMES)


def resolve_path(location: str | Path) -> Path:
    """A local path for ``location``: a registered ``<scheme>://`` URI is resolved by its resolver (``zoo://``
    builds the zoo on first use), anything else is a local path with ``~`` expanded."""
    text = str(location)
    scheme, sep, _ = text.partition("://")
    if sep and scheme in _SCHEMES:
        return Path(_SCHEMES[scheme](text))
    return Path(text).expanduser()
