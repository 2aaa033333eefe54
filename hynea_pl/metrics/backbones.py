"""Pretrained networks behind LPIPS, FID and the embedding metrics, loaded without network access.

Each loader resolves its weights with :func:`hynea_pl.metrics.weights.resolve_checkpoint` (a local path, else the
torch hub cache) BEFORE building anything, builds the torchvision architecture with random init and loads the
state dict. Missing weights raise :class:`MetricUnavailable`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hynea_pl.metrics.weights import MetricUnavailable, load_state_dict, resolve_checkpoint

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "InceptionFeatures", "LPIPSDistance", "ResNetEmbedder", "to_rgb"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# lpips backbone name -> torchvision architecture
_LPIPS_BACKBONES = {"alex": "alexnet", "vgg": "vgg16", "squeeze": "squeezenet1_1"}


def to_rgb(images: Tensor) -> Tensor:
    """``(B, 1|3, H, W)`` -> ``(B, 3, H, W)`` (grayscale repeated)."""
    if images.dim() != 4 or images.shape[1] not in (1, 3):
        raise ValueError(f"expected (B, 1, H, W) or (B, 3, H, W) images, got shape {tuple(images.shape)}")
    return images.expand(-1, 3, -1, -1) if images.shape[1] == 1 else images


def _imagenet_normalize(images: Tensor) -> Tensor:
    mean = images.new_tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = images.new_tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (images - mean) / std


def _resize(images: Tensor, size: int | None) -> Tensor:
    if size is None or tuple(images.shape[-2:]) == (size, size):
        return images
    return F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False, antialias=True)


def _load_into(module: nn.Module, state: dict[str, Tensor], path: Path, arch: str) -> None:
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise MetricUnavailable(f"weights file {path} does not match the {arch} architecture: {exc}") from exc


class LPIPSDistance(nn.Module):
    """LPIPS (``lpips`` package) taking ``[0, 1]`` images ``(B, 1|3, H, W)`` pairs and returning ``(B,)``.

    The linear calibration layers come from the ``lpips`` package; the AlexNet/VGG/SqueezeNet backbone from
    ``weights_path`` or the torch hub cache. The backbone is never downloaded: missing weights raise
    :class:`MetricUnavailable` before anything is built.

    Args:
        net: ``"vgg"`` (the authors' choice), ``"alex"`` or ``"squeeze"``.
        weights_path: local torchvision checkpoint of the backbone (e.g. ``vgg16-397923af.pth``).
        pnet_rand: random backbone - for tests only; the results are meaningless (a warning is emitted).
    """

    def __init__(self, net: str = "vgg", weights_path: str | Path | None = None, pnet_rand: bool = False):
        super().__init__()
        if net not in _LPIPS_BACKBONES:
            raise ValueError(f"unknown LPIPS net {net!r}; choose from {sorted(_LPIPS_BACKBONES)}")
        arch = _LPIPS_BACKBONES[net]
        path = None if pnet_rand else resolve_checkpoint(arch, weights_path)  # raises before any construction
        import lpips

        with warnings.catch_warnings():  # lpips passes torchvision's deprecated `pretrained=False`
            warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")
            model = lpips.LPIPS(pretrained=True, net=net, pnet_rand=True, verbose=False)
        if path is not None:
            state = load_state_dict(path)
            self._load_backbone(model.net, state, path, arch)
        else:
            warnings.warn("LPIPS with a random backbone (pnet_rand=True): for tests only, values are meaningless",
                          stacklevel=2)
        model.eval().requires_grad_(False)
        self.model = model
        self.net = net
        self.random_backbone = pnet_rand
        self.weights_path = None if path is None else str(path)

    @staticmethod
    def _load_backbone(backbone: nn.Module, state: dict[str, Tensor], path: Path, arch: str) -> None:
        # lpips keeps torchvision's `features[i]` layers as `sliceK.i`: map `features.i.<param>` onto them.
        mapped = {}
        for name in backbone.state_dict():
            _slice, rest = name.split(".", 1)
            key = f"features.{rest}"
            if key not in state:
                raise MetricUnavailable(f"weights file {path} has no {key!r}: not a torchvision {arch} checkpoint")
            mapped[name] = state[key]
        _load_into(backbone, mapped, path, arch)

    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        d = self.model(to_rgb(preds).float(), to_rgb(target).float(), normalize=True)
        return d.reshape(d.shape[0])


class ResNetEmbedder(nn.Module):
    """ImageNet ResNet with the fc layer removed: ``[0, 1]`` images ``(B, 1|3, H, W)`` -> ``(B, 2048)``
    (512 for resnet18). Inputs are resized to ``resize`` px (bilinear, antialiased) and ImageNet-normalised.

    Args:
        arch: ``"resnet50"`` (default, the authors' embedding network) or ``"resnet18"``.
        weights_path: local torchvision checkpoint; default: the torch hub cache (``resnet50-0676ba61.pth`` or
            ``resnet50-11ad3fa6.pth``). Missing weights raise :class:`MetricUnavailable`.
    """

    def __init__(self, arch: str = "resnet50", weights_path: str | Path | None = None, resize: int | None = 224):
        super().__init__()
        if arch not in ("resnet50", "resnet18"):
            raise ValueError(f"unsupported embedder architecture {arch!r}")
        path = resolve_checkpoint(arch, weights_path)
        import torchvision

        net = getattr(torchvision.models, arch)(weights=None)
        _load_into(net, load_state_dict(path), path, arch)
        net.fc = nn.Identity()
        self.net = net.eval().requires_grad_(False)
        self.resize = resize
        self.weights_path = str(path)

    @torch.no_grad()
    def forward(self, images: Tensor) -> Tensor:
        x = _imagenet_normalize(_resize(to_rgb(images).float(), self.resize))
        return self.net(x)


class InceptionFeatures(nn.Module):
    """torchvision Inception-v3 pool features (2048-d) for FID: ``[0, 1]`` images ``(B, 1|3, H, W)`` -> ``(B, 2048)``.

    Uses torchvision's ImageNet weights (``inception_v3_google-0cc3c7bd.pth``), not the TF-FID Inception graph, so
    absolute FID values are not comparable with published FIDs; comparisons between methods are.
    """

    def __init__(self, weights_path: str | Path | None = None):
        super().__init__()
        path = resolve_checkpoint("inception_v3", weights_path)
        import torchvision

        net = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False, transform_input=True)
        _load_into(net, load_state_dict(path), path, "inception_v3")
        net.fc = nn.Identity()
        self.net = net.eval().requires_grad_(False)
        self.weights_path = str(path)

    @torch.no_grad()
    def forward(self, images: Tensor) -> Tensor:
        x = _imagenet_normalize(_resize(to_rgb(images).float(), 299))
        return self.net(x)
