"""Offline-by-design environment defaults, applied before any third-party import.

hynea_pl never reaches the network at run time: ultralytics would otherwise make DNS look-ups and try
to pip-install packages, the Hugging Face hub would phone home for telemetry, and W&B would try to sync.
Each default is only set when the user has not set the variable, so a user with network can opt in.
"""

from __future__ import annotations

import os
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
    Path(os.environ["YOLO_CONFIG_DIR"]).mkdir(parents=True, exist_ok=True)
