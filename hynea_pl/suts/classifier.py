"""Multiclass classifier SUT: cross entropy to a target class; flipped when the argmax leaves the origin's."""

from __future__ import annotations

import math
from types import ModuleType
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from hynea_pl.suts.base import SUT

if TYPE_CHECKING:
    from hynea_pl.schema import CaseRecord


def origin_margin(logits: torch.Tensor, label: int) -> torch.Tensor:
    """``logits[:, label] - max_{j != label} logits[:, j]`` per row ``(B,)``: negative once the label lost."""
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"expected logits (B, K >= 2), got shape {tuple(logits.shape)}")
    own = logits[:, label]
    others = logits.clone()
    others[:, label] = -math.inf
    return own - others.max(dim=1).values


class ClassifierSUT(SUT):
    """A multiclass classifier ``images (B, C, H, W) in [0, 1] -> logits (B, K)``.

    Any ``torch.nn.Module`` (``class_path`` + ``init_args`` in YAML) with weights from a state-dict path and the
    preprocessing it was trained with.
    """

    task = "multiclass"
    decision_is_class = True

    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        return output.argmax(-1)

    def default_target(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The origin's second most likely class ``(B,)`` (the case's class is the one to leave)."""
        return self.target_candidates(origin_output, condition)[..., 0]

    def target_candidates(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """Every class but the origin's, most likely first ``(B, K - 1)``: the second most likely class, then the
        third, ..."""
        return origin_output.topk(origin_output.shape[-1], dim=-1).indices[..., 1:]

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

    # --- the baselines' margin ------------------------------------------------------------------------
    def has_margin(self, output: torch.Tensor) -> bool:
        """Logits ``(B, K >= 2)`` (a margin needs a class to lose to)."""
        return output.ndim == 2 and output.shape[1] >= 2

    def decision_margin(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """:func:`origin_margin` of the origin's predicted class: its logit minus the best other logit."""
        return origin_margin(output.float(), int(self.prediction(origin_output)[0]))

    # --- as the validity oracle -----------------------------------------------------------------------
    def judge_reading(self, output: torch.Tensor, target: int | None) -> tuple[int, float]:
        """The most probable class and its probability (the case's target plays no part)."""
        probs = output.float().softmax(-1)[0]
        label = int(probs.argmax())
        return label, float(probs[label])

    # --- a finished record ----------------------------------------------------------------------------
    @classmethod
    def reference_decision(cls, record: CaseRecord, judges_origin_label: int) -> int:
        """The conditioning class (``origin_class``); the judges' reading of the origin when it is unconditional."""
        return record.origin_class if record.origin_class is not None else judges_origin_label

    @classmethod
    def case_metrics(cls, origin: torch.Tensor, result: torch.Tensor, target: int,
                     equations: ModuleType) -> dict[str, float | None] | None:
        """Eq. 9 (argmax changed) and the escape ratio (eqs. 12-13, with at least two classes)."""
        o, r = origin.reshape(1, -1), result.reshape(1, -1)
        esc = float(equations.escape_ratio(o, r)) if o.shape[1] > 1 else None
        return {"mr": float(equations.misclassification_rate(o, r)), "esc": esc, "cr": None}
