"""Resolve user-given model locations: local paths (``~`` expanded) and ``zoo://<profile>/<component>``."""

from __future__ import annotations

from pathlib import Path


def resolve_path(location: str | Path) -> Path:
    """A local path for ``location``; ``zoo://`` URIs build the zoo on first use."""
    text = str(location)
    if text.startswith("zoo://"):
        from hynea_pl.zoo import resolve_zoo_uri

        return resolve_zoo_uri(text)
    return Path(text).expanduser()
