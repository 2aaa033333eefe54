"""Realism of a run folder's images: FID / KID / precision-recall of its results, of its valid failures alone and of
its origins against real reference images, read from the PNGs its records name. The scores themselves are the pure
metrics of :mod:`hynea_pl.metrics.realism`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from hynea_pl.images import load_run_image, run_image_shape
from hynea_pl.metrics.embedding import embed
from hynea_pl.metrics.realism import feature_name, realism_features, realism_from_features
from hynea_pl.metrics.weights import MetricUnavailable, unavailable_entry
from hynea_pl.verdicts import VALID_FAILURE

__all__ = ["run_realism"]


def _stack(run_dir: Path, paths: Sequence[str], expected: tuple[int, ...] | None = None) -> Tensor:
    images = [load_run_image(run_dir / p, expected) for p in paths]
    if len({tuple(i.shape) for i in images}) > 1:
        raise MetricUnavailable("the run's images differ in size")
    return torch.stack(images)


def run_realism(run_dir: Path | str, records: Sequence[Any], features: nn.Module | str | Callable[[], nn.Module],
                reference: Tensor | None,
                batch_size: int = 64, **options: Any) -> dict[str, Any]:
    """Realism of a run folder's result images, of the valid failures' results alone and, as the generator's
    baseline, of its origins: ``{"results": scores, "valid_failures": scores, "origins": scores}`` (scores of
    :func:`~hynea_pl.metrics.realism.realism_scores`; ``options`` go to it), over the cases that ran and have both
    images. ``features``: a module, a :func:`~hynea_pl.metrics.realism.realism_features` name or a factory called
    only when there is something to score. Missing weights, no reference, too few cases or unreadable images give
    ``unavailable_entry`` values instead."""
    run_dir = Path(run_dir)
    cases = [r for r in records if r.is_case and r.ok and r.origin_image and r.result_image]
    expected = run_image_shape(run_dir, cases)  # a PNG of another size is a one-line error naming it
    try:
        if reference is None:
            raise MetricUnavailable("no reference images configured for realism")
        if len(cases) < 2:
            raise MetricUnavailable(f"realism needs >= 2 cases with images, the run has {len(cases)}")
        if isinstance(features, str):
            features = realism_features(features)
        elif not isinstance(features, nn.Module):
            features = features()
        device = next(iter(features.parameters()), reference).device
        ref = embed(features, reference.to(device), batch_size)
        out = {}
        for key, attr in (("results", "result_image"), ("origins", "origin_image")):
            feats = embed(features, _stack(run_dir, [getattr(r, attr) for r in cases], expected).to(device), batch_size)
            out[key] = realism_from_features(feats, ref, feature_name(features), **options)
        valid = [r for r in cases if r.verdict == VALID_FAILURE]
        if len(valid) >= 2:  # the inputs that count: realism of the valid failures alone (their own sample size)
            feats = embed(features, _stack(run_dir, [r.result_image for r in valid], expected).to(device), batch_size)
            out["valid_failures"] = realism_from_features(feats, ref, feature_name(features), **options)
        else:
            out["valid_failures"] = unavailable_entry(MetricUnavailable(
                f"realism of valid failures needs >= 2 of them, the run has {len(valid)}"))
        return out
    except (MetricUnavailable, OSError) as exc:
        return {"results": unavailable_entry(exc), "origins": unavailable_entry(exc),
                "valid_failures": unavailable_entry(exc)}
