"""Per-image typicality: is an image as close to some real image as real images are to each other?

The per-sample form of the k-NN manifold test (Kynkaenniemi et al. 2019, "Improved precision and recall"; Naeem et
al. 2020, ``prdc``): an image's distance to its ``k``-th nearest real reference image, compared with the same
distance of held-out real images (each left out of the reference it is measured against).
"""

from __future__ import annotations

import torch
from torch import Tensor


def knn_radius(queries: Tensor, reference: Tensor, k: int = 1, exclude_self: bool = False) -> Tensor:
    """Distance ``(N,)`` of each row of ``queries (N, D)`` to its ``k``-th nearest row of ``reference (M, D)``
    (Euclidean). ``exclude_self``: ``queries`` *is* ``reference`` and each row's zero distance to itself is
    skipped (leave-one-out). Computed in chunks of queries, so a 10,000-image reference needs no 10,000 x 10,000
    matrix."""
    if queries.dim() != 2 or reference.dim() != 2 or queries.shape[1] != reference.shape[1]:
        raise ValueError(f"expected (N, D) and (M, D), got {tuple(queries.shape)} and {tuple(reference.shape)}")
    rank = k + int(exclude_self)
    if not 1 <= rank <= reference.shape[0]:
        raise ValueError(f"k={k} needs more than {reference.shape[0]} reference rows")
    reference = reference.double()
    rows = max(1, 2**23 // reference.shape[0])  # a chunk's distances take at most 64 MB
    return torch.cat([torch.cdist(chunk.double(), reference).topk(rank, dim=1, largest=False).values[:, -1]
                      for chunk in queries.split(rows)]) if len(queries) else queries.new_zeros(0, dtype=torch.double)


def percentile_rank(values: Tensor, calibration: Tensor) -> Tensor:
    """Fraction ``(N,)`` of ``calibration`` values strictly below each of ``values (N,)``: 0 for an image closer
    than every calibration image, 1 for one farther than all of them."""
    ordered = calibration.double().sort().values
    return torch.searchsorted(ordered, values.double().contiguous(), right=False).double() / len(ordered)


def typicality_score(radii: dict[str, Tensor], calibration: dict[str, Tensor]) -> Tensor:
    """Combined score ``(N,)`` over feature spaces: the largest percentile rank of an image's k-NN radius among
    the calibration radii of the same space (an image must be typical in every space)."""
    if set(radii) != set(calibration) or not radii:
        raise ValueError(f"radii for {sorted(radii)}, calibration for {sorted(calibration)}")
    return torch.stack([percentile_rank(radii[name], calibration[name]) for name in sorted(radii)]).amax(0)


__all__ = ["knn_radius", "percentile_rank", "typicality_score"]
