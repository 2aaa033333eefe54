"""Saving and loading trained adapters the diffusers way: a folder with ``config.json`` + safetensors weights.

A HyperNet is a trainable copy of part of a frozen denoiser, so its folder holds its own settings (``config.json``,
with ``_class_name``) and *all* of its weights (``diffusion_pytorch_model.safetensors``, the file name diffusers'
``ModelMixin.save_pretrained`` writes), but not the denoiser: ``from_pretrained(directory, <frozen parts>)`` builds
a fresh copy from the frozen denoiser and loads the saved weights into it, strictly. Every failure is one line
naming the folder or file: ``FileNotFoundError`` when something is missing, ``ValueError`` when the saved weights
or class do not fit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from diffusers.utils import CONFIG_NAME, SAFETENSORS_WEIGHTS_NAME
from safetensors.torch import load_file, save_file
from torch import nn

M = TypeVar("M", bound=nn.Module)
H = TypeVar("H", bound="PretrainedHyperNetMixin")


def require_files(directory: str | Path, names: Sequence[str], what: str) -> Path:
    """``directory`` as a ``Path`` when it is a folder holding every file in ``names``; else a one-line
    ``FileNotFoundError`` naming the missing folder or file (``what`` names the thing being loaded)."""
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{what}: saved folder not found: {folder}")
    for name in names:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{what}: {folder / name} not found")
    return folder


def save_weights(module: nn.Module, directory: str | Path) -> Path:
    """Write ``module.state_dict()`` (on CPU, contiguous: ``channels_last`` copies too) to
    ``<directory>/diffusion_pytorch_model.safetensors``; returns the file."""
    file = Path(directory) / SAFETENSORS_WEIGHTS_NAME
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in module.state_dict().items()}
    save_file(state, str(file))
    return file


def load_weights(module: M, directory: str | Path) -> M:
    """Load ``<directory>/diffusion_pytorch_model.safetensors`` into ``module`` strictly (every key, every shape);
    a mismatch is a one-line ``ValueError`` naming the file and the first offending keys."""
    file = require_files(directory, [SAFETENSORS_WEIGHTS_NAME], type(module).__name__) / SAFETENSORS_WEIGHTS_NAME
    saved = load_file(str(file))
    expected = module.state_dict()
    problems = []
    for label, keys in (("missing", expected.keys() - saved.keys()), ("unexpected", saved.keys() - expected.keys()),
                        ("shape mismatch", {k for k in expected.keys() & saved.keys()
                                            if expected[k].shape != saved[k].shape})):
        if keys:
            names = sorted(keys)
            problems.append(f"{label} {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} ({len(names)})")
    if problems:
        raise ValueError(f"{file} does not fit this {type(module).__name__}: {'; '.join(problems)}")
    module.load_state_dict(saved, strict=True)
    return module


class PretrainedHyperNetMixin:
    """``save_pretrained`` / ``from_pretrained`` for a HyperNet (an ``nn.Module``) built from frozen modules.

    A subclass returns its JSON-able constructor settings from :meth:`hypernet_config` and writes a
    ``from_pretrained(directory, <frozen parts>)`` classmethod as
    ``cls(<frozen parts>, **cls.read_config(directory)).load_pretrained_weights(directory)``.
    """

    def hypernet_config(self) -> dict[str, Any]:
        """The constructor settings besides the frozen modules (JSON-able)."""
        raise NotImplementedError(f"{type(self).__name__} must implement hypernet_config()")

    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``config.json`` (``_class_name`` + :meth:`hypernet_config`) and the weights into ``directory``
        (created if needed)."""
        folder = Path(directory).expanduser()
        if folder.is_file():
            raise ValueError(f"{type(self).__name__}.save_pretrained: {folder} is a file, not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        config = {"_class_name": type(self).__name__, **self.hypernet_config()}
        (folder / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        save_weights(self, folder)

    @classmethod
    def read_config(cls, directory: str | Path) -> dict[str, Any]:
        """The constructor settings saved in ``directory`` (``_class_name`` checked and removed)."""
        folder = require_files(directory, [CONFIG_NAME, SAFETENSORS_WEIGHTS_NAME], cls.__name__)
        config = json.loads((folder / CONFIG_NAME).read_text())
        saved_class = config.pop("_class_name", None)
        if saved_class != cls.__name__:
            raise ValueError(f"{folder / CONFIG_NAME} holds a {saved_class}, not a {cls.__name__}")
        return config

    def load_pretrained_weights(self: H, directory: str | Path) -> H:
        """Load the weights saved in ``directory`` into this HyperNet, strictly; returns it."""
        return load_weights(self, directory)


__all__ = ["PretrainedHyperNetMixin", "load_weights", "require_files", "save_weights"]
