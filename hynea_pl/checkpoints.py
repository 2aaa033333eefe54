"""Reading a state dict from a weights file: the one reader behind the SUTs' and the metrics' weight loading."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """A state dict from a ``.safetensors`` file or a ``torch.save`` file (``.pt`` / ``.pth`` / a Lightning
    ``.ckpt``); ``{"state_dict": ...}`` / ``{"model": ...}`` wrappers are unwrapped and ``module.`` prefixes
    (DataParallel) stripped. Raises a one-line ``ValueError`` naming the file when it cannot be read or holds no
    state dict."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch's paragraph (suggesting weights_only=False) would not name the file
        raise ValueError(f"weights file {path} is not a loadable state dict ({type(error).__name__}; expected a "
                         ".safetensors file or a torch.save of tensors)") from None
    for key in ("state_dict", "model"):
        if isinstance(state, Mapping) and isinstance(state.get(key), Mapping):
            state = state[key]
    if not isinstance(state, Mapping):
        raise ValueError(f"weights file {path} does not hold a state dict")
    return {k.removeprefix("module."): v for k, v in state.items()}
