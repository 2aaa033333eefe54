"""Where pretrained backbone weights come from, and what happens when they are missing.

LPIPS, FID and the ResNet embedder need ImageNet-pretrained backbones. hynea_pl never downloads them: a
backbone is read either from a configured local file or from the torch hub checkpoint cache
(``torch.hub.get_dir()/checkpoints``, i.e. ``$TORCH_HOME/hub/checkpoints``) under torchvision's file name.
When neither exists the metric raises :class:`MetricUnavailable` with the reason, and the record writer turns
that into ``{"value": None, "unavailable": reason}`` (:func:`unavailable_entry`). A number computed from
random weights is never reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from hynea_pl.checkpoints import read_state_dict

__all__ = [
    "CHECKPOINT_FILES",
    "MetricUnavailable",
    "hub_checkpoint_dir",
    "load_state_dict",
    "metric_entry",
    "resolve_checkpoint",
    "to_record_value",
    "unavailable_entry",
]

#: torchvision checkpoint file names (as torch.hub caches them), in order of preference, per architecture.
CHECKPOINT_FILES: dict[str, tuple[str, ...]] = {
    "alexnet": ("alexnet-owt-7be5be79.pth",),
    "vgg16": ("vgg16-397923af.pth",),
    "squeezenet1_1": ("squeezenet1_1-b8a52dc0.pth",),
    # IMAGENET1K_V1 first (the classic weights), IMAGENET1K_V2 accepted as a fallback.
    "resnet50": ("resnet50-0676ba61.pth", "resnet50-11ad3fa6.pth"),
    "resnet18": ("resnet18-f37072fd.pth",),
    "inception_v3": ("inception_v3_google-0cc3c7bd.pth",),
}


class MetricUnavailable(RuntimeError):
    """A metric cannot be computed honestly (e.g. its pretrained weights are missing).

    ``reason`` is a one-line human-readable explanation that ends up in the metrics record.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def unavailable_entry(reason: str | BaseException) -> dict[str, Any]:
    """Record entry for a metric that could not be computed: ``{"value": None, "unavailable": reason}``."""
    if isinstance(reason, MetricUnavailable):
        reason = reason.reason
    return {"value": None, "unavailable": str(reason)}


def to_record_value(value: Any) -> Any:
    """Convert tensors / numpy scalars / nested containers to JSON-safe Python values (NaN and inf -> None)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = value.item() if value.numel() == 1 and value.dim() == 0 else value.tolist()
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_record_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_record_value(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays
        return to_record_value(value.tolist())
    return value


def metric_entry(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; return its JSON-safe value, or :func:`unavailable_entry` when it raises MetricUnavailable."""
    try:
        return to_record_value(fn(*args, **kwargs))
    except MetricUnavailable as exc:
        return unavailable_entry(exc)


def hub_checkpoint_dir() -> Path:
    """The torch hub checkpoint cache, read at call time (follows ``TORCH_HOME``)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def resolve_checkpoint(arch: str, local_path: str | Path | None = None, filenames: Sequence[str] | None = None) -> Path:
    """Path of the pretrained weights of ``arch``, without any network access.

    Args:
        arch: torchvision architecture name (a key of :data:`CHECKPOINT_FILES`) - used for file names and messages.
        local_path: explicit weights file; when given it must exist (the cache is not consulted).
        filenames: override the cache file names to look for.

    Raises:
        MetricUnavailable: when the weights are not found.
    """
    if local_path is not None:
        path = Path(local_path).expanduser()
        if path.is_file():
            return path
        raise MetricUnavailable(f"{arch} weights not found at the configured local path {path}")
    names = tuple(filenames) if filenames is not None else CHECKPOINT_FILES.get(arch, ())
    cache = hub_checkpoint_dir()
    for name in names:
        path = cache / name
        if path.is_file():
            return path
    raise MetricUnavailable(
        f"pretrained {arch} weights missing: none of {list(names)} in the torch hub cache {cache} "
        f"(set TORCH_HOME or configure a local weights path); hynea_pl does not download weights"
    )


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """A metric backbone's state dict (:func:`hynea_pl.checkpoints.read_state_dict`); any read failure makes the
    metric unavailable instead of failing the run."""
    try:
        return read_state_dict(path)
    except Exception as exc:  # noqa: BLE001 - any read failure makes the metric unavailable
        raise MetricUnavailable(f"could not read weights file {path}: {type(exc).__name__}: {exc}") from exc
