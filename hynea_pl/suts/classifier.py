"""Multiclass classifier SUT: cross entropy to a target class; flipped when the argmax leaves the origin's."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hynea_pl.suts.base import SUT


class ClassifierSUT(SUT):
    """A multiclass classifier ``images (B, C, H, W) in [0, 1] -> logits (B, K)``.

    Any ``torch.nn.Module`` (``class_path`` + ``init_args`` in YAML) with weights from a state-dict path and the
    preprocessing it was trained with.
    """

    task = "multiclass"

    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        return output.argmax(-1)

    def default_target(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The origin's second most likely class ``(B,)`` (the case's class is the one to leave)."""
        return origin_output.topk(2, dim=-1).indices[..., 1]

    def objective_labels(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The target classes ``(B,)``."""
        return target

    def behaviour_loss(self, output: torch.Tensor, labels: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Cross entropy of logits ``(B, K)`` to the target classes ``labels (B,)`` (paper eq. 4), averaged."""
        return F.cross_entropy(output, labels.to(output.device))

    def is_flipped(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the predicted class is not the origin's (paper eq. 9)."""
        return output.argmax(-1) != origin_output.to(output.device).argmax(-1)

    def reaches_target(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the predicted class is the target class."""
        return output.argmax(-1) == target.to(output.device)

    def keeps(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor,
              margin: float = 0.0) -> torch.Tensor:
        """``(B,)`` bool: still the origin's class, with probability at least ``margin``."""
        kept = origin_output.to(output.device).argmax(-1)
        probability = output.float().softmax(-1).gather(1, kept[:, None])[:, 0]
        return (output.argmax(-1) == kept) & (probability >= margin)

    def keep_loss(self, output: torch.Tensor, origin_output: torch.Tensor) -> torch.Tensor:
        """Cross entropy of ``output (B, K)`` to the origin's predicted class."""
        return F.cross_entropy(output, origin_output.to(output.device).argmax(-1))

    def control_signal(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """One-hot of the target class ``(B, K)``."""
        return F.one_hot(target, origin_output.shape[-1]).to(origin_output.dtype)

    def is_valid_origin(self, origin_output: torch.Tensor, condition: int | None) -> torch.Tensor:
        """An origin is a test case only when the SUT predicts its conditioning class (paper 4.5)."""
        if condition is None:
            return torch.ones(origin_output.shape[0], dtype=torch.bool, device=origin_output.device)
        return origin_output.argmax(-1) == condition
