"""Offline-by-design environment defaults, applied before any third-party import.

hynea_pl never reaches the network at run time: ultralytics would otherwise make DNS look-ups and try
to pip-install packages, the Hugging Face hub would phone home for telemetry, and W&B would try to sync.
Each default is only set when the user has not set the variable, so a user with network can opt in.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """Root of hynea_pl's cache: ``$HYNEA_PL_CACHE`` or ``~/.cache/hynea_pl``."""
    return Path(os.environ.get("HYNEA_PL_CACHE", Path.home() / ".cache" / "hynea_pl")).expanduser()


def apply_offline_defaults() -> None:
    """Set the environment variables that keep third-party libraries off the network."""
    defaults = {
        "YOLO_OFFLINE": "1",
        "YOLO_AUTOINSTALL": "false",
        "YOLO_CONFIG_DIR": str(cache_root() / "ultralytics"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "DISABLE_TELEMETRY": "1",  # diffusers
        "WANDB_SILENT": "true",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    try:  # never at import: an unusable cache is reported by the command that needs it (check_cache)
        Path(os.environ["YOLO_CONFIG_DIR"]).mkdir(parents=True, exist_ok=True)
    except OSError:
        pass


def _cache_label(root: Path) -> str:
    return f"HYNEA_PL_CACHE={root}" if "HYNEA_PL_CACHE" in os.environ else f"the cache folder {root}"


def check_cache(write: bool = False) -> Path:
    """The cache root, checked: a one-line ``OSError`` when it is not a folder, or (``write``) when it cannot be
    created or written (a read-only file system, a parent that is a file)."""
    root = cache_root()
    hint = "; point HYNEA_PL_CACHE at a writable folder"
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{_cache_label(root)} is not a folder (it is a file){hint}")
    if not write:
        return root
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe, name = tempfile.mkstemp(prefix=".write-probe-", dir=root)
        os.close(probe)
        os.unlink(name)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise OSError(f"{_cache_label(root)} cannot be written ({reason}){hint}") from None
    return root
