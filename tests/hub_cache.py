"""A fake Hugging Face hub cache (so hub ids load offline, from the cache only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def fake_hub_cache(monkeypatch: pytest.MonkeyPatch, cache: Path, repo_id: str | None = None,
                   save: Callable[[Path], object] | None = None, revision: str = "0" * 40) -> Path:
    """Point ``HF_HUB_CACHE`` at ``cache`` (empty unless ``repo_id`` is given); with ``repo_id``, write its snapshot
    there with ``save(folder)`` and its ``refs/main``. Returns ``cache``."""
    from huggingface_hub import constants

    if repo_id is not None and save is not None:
        repo = cache / f"models--{repo_id.replace('/', '--')}"
        save(repo / "snapshots" / revision)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache
