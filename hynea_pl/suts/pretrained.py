"""Multiclass classifiers by name from torchvision or timm, with weights from a local cache or path, never downloaded.

YAML (``sut:`` section)::

    sut:
      class_path: hynea_pl.suts.PretrainedClassifierSUT
      init_args:
        name: wide_resnet50_2          # any torchvision classification model or timm model
        weights: null                  # null: the torch hub / Hugging Face cache; or a local state-dict path
        # pretrained: false            # explicit opt-in to random weights (never silent)

Weight resolution, in order:

1. ``weights`` is a local path (``.pt`` / ``.pth`` / ``.safetensors`` / Lightning ``.ckpt``, or ``zoo://``): the
   architecture is built with random weights (``num_classes`` as given) and the state dict is loaded strictly.
2. ``pretrained: true`` (the default) and no path: torchvision's default weights from the torch hub cache
   (``$TORCH_HOME/hub/checkpoints/<file of the weights url>``, ``torch.hub.get_dir()``), or timm's pretrained
   weights from the Hugging Face hub cache (``model.safetensors`` / ``pytorch_model.bin`` of the model's
   ``hf_hub_id``). When the file is not there: a one-line ``FileNotFoundError`` naming the missing file.
3. ``pretrained: false``: random weights, only when asked for explicitly.

Preprocessing, when no ``preprocess`` is given (images in [0, 1], ``(B, C, H, W)``; grayscale is repeated to RGB):

- torchvision models: ``imagenet_preprocess`` -- resized to ``image_size`` x ``image_size`` (224 when null;
  bilinear, antialiased, no centre crop: the generator's image is the whole scene), then normalised with the
  ImageNet mean ``(0.485, 0.456, 0.406)`` and std ``(0.229, 0.224, 0.225)``, the statistics torchvision's
  ImageNet weights were trained with;
- timm models: timm's own eval preprocessing from the model's pretrained data config
  (``timm.data.resolve_data_config({}, model=model)``, :func:`hynea_pl.suts.preprocess.timm_preprocess`):
  resize to ``input_size / crop_pct`` with the config's interpolation, centre crop to ``input_size``, normalise
  with the config's mean and std -- e.g. a model trained at 288 px or with mean / std 0.5 gets exactly that.
  ``image_size`` (when set) replaces the config's input size.

Pass ``preprocess`` to override either: a ``Preprocess`` mapping or a ``torchvision.transforms.v2`` pipeline
(:mod:`hynea_pl.suts.preprocess`).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision
from torch import nn

from hynea_pl.suts.base import load_state_dict
from hynea_pl.suts.classifier import ClassifierSUT
from hynea_pl.suts.preprocess import Preprocess, timm_preprocess

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def imagenet_preprocess(size: int = 224) -> Preprocess:
    """Resize to ``size x size``, RGB, ImageNet mean/std normalisation."""
    return Preprocess(size=size, channels=3, mean=list(IMAGENET_MEAN), std=list(IMAGENET_STD))


def _torchvision_names() -> set[str]:
    return set(torchvision.models.list_models(module=torchvision.models))


def _resolve_source(name: str, source: str) -> str:
    if source not in ("auto", "torchvision", "timm"):
        raise ValueError(f"source must be 'auto', 'torchvision' or 'timm', got {source!r}")
    if source == "torchvision" or (source == "auto" and name in _torchvision_names()):
        if name not in _torchvision_names():
            raise ValueError(f"torchvision has no classification model {name!r}")
        return "torchvision"
    import timm

    if not timm.is_model(name):
        raise ValueError(f"unknown classifier {name!r}: neither a torchvision classification model nor a timm model")
    return "timm"


def _build(name: str, source: str, num_classes: int | None, kwargs: dict) -> nn.Module:
    extra = dict(kwargs)
    if num_classes is not None:
        extra["num_classes"] = num_classes
    if source == "torchvision":
        return torchvision.models.get_model(name, weights=None, **extra)
    import timm

    return timm.create_model(name, pretrained=False, **extra)


def _torchvision_cached(name: str, num_classes: int | None, kwargs: dict) -> nn.Module:
    weights = torchvision.models.get_model_weights(name).DEFAULT
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
    if not cached.is_file():
        raise FileNotFoundError(
            f"pretrained weights for torchvision {name!r} not found: {cached} is missing "
            f"(copy the file of {weights.url} there, pass weights: <local path>, "
            f"or pretrained: false for random weights)"
        )
    expected = len(weights.meta["categories"])
    if num_classes is not None and num_classes != expected:
        raise ValueError(f"{weights} has {expected} classes, not num_classes={num_classes}: pass a local weights path")
    # The file is in the hub cache, so torchvision reads it from there (no network) and applies its own key fixes.
    return torchvision.models.get_model(name, weights=weights, **kwargs)


def _timm_cached(name: str, num_classes: int | None, kwargs: dict) -> nn.Module:
    import timm
    from huggingface_hub import try_to_load_from_cache

    cfg = timm.models.get_pretrained_cfg(name)
    repo = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not repo:
        raise FileNotFoundError(f"pretrained weights for timm {name!r} not found: it has no Hugging Face hub id "
                                f"(pass weights: <local path>, or pretrained: false for random weights)")
    for filename in ("model.safetensors", "pytorch_model.bin"):
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, str) and Path(found).is_file():
            extra = dict(kwargs)
            if num_classes is not None:
                extra["num_classes"] = num_classes
            return timm.create_model(name, pretrained=True, pretrained_cfg_overlay={"file": found}, **extra)
    raise FileNotFoundError(
        f"pretrained weights for timm {name!r} not found: no model.safetensors of {repo} in the Hugging Face cache "
        f"(pass weights: <local path>, or pretrained: false for random weights)"
    )


def pretrained_classifier(name: str = "wide_resnet50_2", weights: str | None = None, pretrained: bool = True,
                          source: str = "auto", num_classes: int | None = None, strict: bool = True,
                          **kwargs) -> nn.Module:
    """A classifier ``nn.Module`` (eval mode, frozen) by torchvision / timm name; see the module docstring.

    ``source``: ``"auto"`` (torchvision first, then timm), ``"torchvision"`` or ``"timm"``. ``num_classes``:
    the head size (with a local ``weights`` path or ``pretrained: false``). Extra keyword arguments go to the
    model constructor.
    """
    source = _resolve_source(name, source)
    if weights is not None:
        model = _build(name, source, num_classes, kwargs)
        state = load_state_dict(weights)
        try:
            model.load_state_dict(state, strict=strict)
        except RuntimeError as error:
            first = str(error).strip().splitlines()[0]
            raise ValueError(f"weights {weights} do not fit {source} {name!r}: {first}") from None
    elif not pretrained:
        model = _build(name, source, num_classes, kwargs)
    elif source == "torchvision":
        model = _torchvision_cached(name, num_classes, kwargs)
    else:
        model = _timm_cached(name, num_classes, kwargs)
    return model.eval().requires_grad_(False)


class PretrainedClassifierSUT(ClassifierSUT):
    """A multiclass ``ClassifierSUT`` built by name (``wide_resnet50_2`` by default, the paper's ImageNet SUT).

    ``preprocess`` defaults to :func:`imagenet_preprocess` at ``image_size`` (224 when null) for a torchvision
    model, and to timm's pretrained data config (:func:`hynea_pl.suts.preprocess.timm_preprocess`) for a timm model.
    """

    def __init__(self, name: str = "wide_resnet50_2", weights: str | None = None, pretrained: bool = True,
                 source: str = "auto", num_classes: int | None = None, image_size: int | None = None,
                 preprocess: Preprocess | nn.Module | None = None, strict: bool = True) -> None:
        model = pretrained_classifier(name, weights=weights, pretrained=pretrained, source=source,
                                      num_classes=num_classes, strict=strict)
        if preprocess is None:
            if _resolve_source(name, source) == "timm":
                preprocess = timm_preprocess(model, image_size)
            else:
                preprocess = imagenet_preprocess(image_size or 224)
        super().__init__(model, weights=None, preprocess=preprocess)
        self.name = name
