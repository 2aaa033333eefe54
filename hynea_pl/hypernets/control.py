"""The control path every HyperNet shares: a control batch fitted to the model batch it is added to."""

from __future__ import annotations

import torch
from torch import Tensor


def expand_control(control: Tensor, batch: int, dtype: torch.dtype | None = None) -> Tensor:
    """``control (B, ...)`` -> ``(N, ...)`` for a model batch of ``N`` rows, cast to ``dtype`` when given.

    ``N`` must be a multiple of ``B``: the control batch is repeated ``N / B`` times along dim 0, in the order the
    chain stacks a classifier-free-guidance batch (``torch.cat([latents, latents])``: ``N = 2B``, both halves see
    the same controls). Raises ``ValueError`` ("does not divide") otherwise.
    """
    rows = control.shape[0]
    if rows != batch:
        if rows == 0 or batch % rows:
            raise ValueError(f"control batch {rows} does not divide model batch {batch}")
        control = control.repeat(batch // rows, *([1] * (control.dim() - 1)))
    return control if dtype is None else control.to(dtype)


__all__ = ["expand_control"]
