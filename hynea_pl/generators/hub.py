"""Load a diffusers / transformers component from a local folder or a Hugging Face hub id, the same way for every
generator family.

Order: a local folder (``~`` expanded, ``zoo://`` resolved), else the local Hugging Face cache
(``local_files_only=True``), else -- only when ``download`` is on, ``HF_HUB_OFFLINE`` is not set and a quick TCP
probe of the hub endpoint succeeds -- the hub. Whatever fails, the user gets a one-line ``FileNotFoundError``
naming the location.
"""

from __future__ import annotations

import os
import socket
import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from hynea_pl.paths import resolve_path

_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set (in the environment now, or when ``huggingface_hub`` was imported)."""
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE or bool(constants.HF_HUB_OFFLINE)


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hugging Face endpoint opens within ``timeout`` seconds.

    Checked once per process (``hub_reachable.cache_clear()`` re-probes), in a daemon thread so that a hanging DNS
    look-up cannot block loading.
    """
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except Exception:  # noqa: BLE001 - DNS failure, refusal, timeout, a test's network guard: all unreachable
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return bool(result and result[0])


def is_repo_id(location: str) -> bool:
    """Whether ``location`` is a valid hub repo id (``name`` or ``owner/name``), not a path or a URI."""
    if location.startswith(("/", ".", "~")) or "://" in location or location.count("/") > 1:
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(location)
    except HFValidationError:
        return False
    return True


def checkpoint_not_found(what: str, location: str) -> FileNotFoundError:
    """The one-line error for a checkpoint that is neither a local folder nor in the Hugging Face cache."""
    return FileNotFoundError(
        f"{what} checkpoint not found: {location} (not a local folder and not in the Hugging Face cache)"
    )


def local_folder(location: str | Path) -> Path | None:
    """``location`` as an existing local folder (``~`` expanded, ``zoo://`` resolved), else ``None``."""
    path = resolve_path(location)
    return path if path.is_dir() else None


def checkpoint_key(location: str | Path) -> str:
    """A per-process cache key for ``location``: the absolute path of a local folder, else the string itself."""
    folder = local_folder(location)
    return str(folder.resolve()) if folder is not None else str(location)


def require_subfolders(location: str | Path, subfolders: Sequence[str], what: str = "generator",
                       layout: str | None = None) -> None:
    """When ``location`` is a local folder, a one-line ``FileNotFoundError`` naming it and every missing subfolder
    (``layout``, if given, is appended in parentheses). Hub ids are not checked here."""
    folder = local_folder(location)
    if folder is None:
        return
    missing = [sub for sub in subfolders if not (folder / sub).is_dir()]
    if missing:
        names = ", ".join(f"{sub}/" for sub in missing)
        hint = f" ({layout})" if layout else ""
        raise FileNotFoundError(f"{what} checkpoint incomplete: {folder} has no {names} "
                                f"folder{'s' if len(missing) > 1 else ''}{hint}")


def load_pretrained(loader: Any, location: str | Path, what: str = "generator", subfolder: str | None = None, *,
                    download: bool = True, **kwargs: Any) -> Any:
    """``loader.from_pretrained(location, subfolder=subfolder, **kwargs)`` from a local folder, else from the Hugging
    Face cache, else (with ``download``, when the hub is not offline and reachable) from the hub.

    ``loader`` is anything with a ``from_pretrained`` (a diffusers / transformers class or an adapter); ``what``
    names the checkpoint in errors (``generator``, ``ControlNet``...). Raises a one-line ``FileNotFoundError``:
    ``<what> checkpoint incomplete: <path> has no <subfolder>/ folder`` for a local folder without the subfolder,
    ``<what> checkpoint not found: <location> (...)`` otherwise.
    """
    sub = {} if subfolder is None else {"subfolder": subfolder}
    folder = local_folder(location)
    if folder is not None:
        if subfolder is not None:
            require_subfolders(folder, [subfolder], what)
        return loader.from_pretrained(str(folder), **sub, **kwargs)
    location = str(location)
    if resolve_path(location).exists() or not is_repo_id(location):
        raise checkpoint_not_found(what, location)
    with warnings.catch_warnings():
        # diffusers passes the deprecated ``local_dir_use_symlinks`` to hf_hub_download on every hub-id load
        warnings.filterwarnings("ignore", message=".*local_dir_use_symlinks.*")
        try:
            return loader.from_pretrained(location, **sub, local_files_only=True, **kwargs)
        except (OSError, ValueError) as error:  # not (completely) in the local cache
            if not download or hub_offline() or not hub_reachable():
                raise checkpoint_not_found(what, location) from error
        try:
            return loader.from_pretrained(location, **sub, **kwargs)
        except Exception as error:  # noqa: BLE001 - any hub failure is a missing checkpoint to the user
            raise FileNotFoundError(f"{what} checkpoint not found: {location} (not a local folder, not in the "
                                    f"Hugging Face cache, and the hub did not serve it: {type(error).__name__})"
                                    ) from error


__all__ = [
    "checkpoint_key",
    "checkpoint_not_found",
    "hub_offline",
    "hub_reachable",
    "is_repo_id",
    "load_pretrained",
    "local_folder",
    "require_subfolders",
]
