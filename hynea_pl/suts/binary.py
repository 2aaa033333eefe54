"""Multi-label binary SUT (e.g. CelebA: 40 attribute logits): flip one tested attribute, keep the others.

Semantics (HyNeA paper eqs. 5 and 10, REFERENCE.md):

- target: the tested attribute index per batch item ``(B,)``;
- control signal and BCE targets: the origin's attribute decisions as 0/1 (``logit > 0`` -> 1; a logit of exactly
  0 counts as negative) with the tested attribute inverted, ``(B, K)``; ``control: signed`` gives the same as
  -1/+1 for the projector (the BCE targets stay 0/1);
- behaviour loss: ``binary_cross_entropy_with_logits`` of the current logits toward those targets, averaged over
  all K attributes and the batch (``all_attributes: false``: only the tested logit);
- flip: the tested logit's sign differs from the origin's (``(logit > 0)`` changes).

The origin's decisions are passed explicitly: a case fixes its BCE targets once from the origin
(:meth:`BinaryAttributeSUT.objective_labels`) and hands the origin output to :meth:`~BinaryAttributeSUT.is_flipped`.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from hynea_pl.suts.base import SUT
from hynea_pl.suts.preprocess import Preprocess

if TYPE_CHECKING:
    from hynea_pl.schema import CaseRecord

CELEBA_ATTRIBUTES = [
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs", "Big_Lips", "Big_Nose",
    "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair", "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses",
    "Goatee", "Gray_Hair", "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline", "Rosy_Cheeks",
    "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings", "Wearing_Hat", "Wearing_Lipstick",
    "Wearing_Necklace", "Wearing_Necktie", "Young",
]


def attribute_margin(logits: torch.Tensor, origin_logits: torch.Tensor, attribute: int) -> torch.Tensor:
    """``(B,)``: the tested attribute's logit of ``logits (B, K)`` signed toward the origin's decision on
    ``origin_logits (1, K)`` (``+logit`` when the origin reads it present, i.e. ``> 0``; ``-logit`` otherwise):
    positive while the decision holds, lower = closer to (or further past) the flip."""
    sign = 1.0 if float(origin_logits[0, attribute]) > 0 else -1.0
    return sign * logits[:, attribute]


class BinaryAttributeSUT(SUT):
    """A multi-label model ``images (B, C, H, W) in [0, 1] -> logits (B, K)`` tested on one attribute.

    ``attribute``: the tested logit's index, or a name from ``attribute_names`` (default: the 40 CelebA attributes
    in the dataset's order, e.g. ``Smiling`` = 31). ``control``: ``"binary"`` (0/1, the default, the BCE targets
    themselves) or ``"signed"`` (-1/+1).
    """

    task = "binary"
    target_is_class = False  # the target is the tested attribute's index

    def __init__(self, model: nn.Module, attribute: int | str = 31, weights: str | None = None,
                 preprocess: Preprocess | nn.Module | None = None, strict: bool = True, control: str = "binary",
                 all_attributes: bool = True, attribute_names: list[str] | None = None) -> None:
        super().__init__(model, weights=weights, preprocess=preprocess)
        names = list(attribute_names) if attribute_names is not None else list(CELEBA_ATTRIBUTES)
        if isinstance(attribute, str):
            if attribute not in names:
                raise ValueError(f"unknown attribute {attribute!r}; known: {', '.join(names)}")
            attribute = names.index(attribute)
        if control not in ("binary", "signed"):
            raise ValueError(f"control must be 'binary' or 'signed', got {control!r}")
        self.attribute = int(attribute)
        self.attribute_names = names
        self.control = control
        self.all_attributes = all_attributes

    def _check(self, output: torch.Tensor) -> None:
        if output.ndim != 2 or not 0 <= self.attribute < output.shape[-1]:
            raise ValueError(f"expected logits (B, K) with K > attribute {self.attribute}, got {tuple(output.shape)}")

    # --- task semantics -------------------------------------------------------------------------------
    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        """The tested attribute's decision ``(B,)``: 1 when its logit is > 0."""
        return (output[:, self.attribute] > 0).long()

    def default_target(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The configured attribute index for each item ``(B,)`` (``condition`` is the origin's decision, not a
        target)."""
        self._check(origin_output)
        return torch.full(origin_output.shape[:1], self.attribute, dtype=torch.long, device=origin_output.device)

    def control_signal(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The BCE targets ``(B, K)``: 0/1, or -1/+1 with ``control: signed``."""
        targets = self.objective_labels(origin_output, target)
        return targets * 2 - 1 if self.control == "signed" else targets

    def objective_labels(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The BCE targets ``(B, K)``: the origin's decisions with the tested attribute inverted."""
        self._check(origin_output)
        signs = (origin_output > 0).to(origin_output.dtype)
        index = target.to(origin_output.device).long().view(-1, 1)
        return signs.scatter(1, index, 1 - signs.gather(1, index))

    def behaviour_loss(self, output: torch.Tensor, labels: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """BCE with logits toward ``labels`` (paper eq. 5), over all K attributes or only the tested one."""
        labels = labels.to(output.device).expand_as(output)
        if self.all_attributes:
            return F.binary_cross_entropy_with_logits(output, labels)
        index = target.to(output.device).long().view(-1, 1)
        return F.binary_cross_entropy_with_logits(output.gather(1, index), labels.gather(1, index))

    def keep_loss(self, output: torch.Tensor, origin_output: torch.Tensor) -> torch.Tensor:
        """BCE with logits of ``output (B, K)`` toward the origin's own decisions (nothing inverted)."""
        signs = (origin_output.to(output.device) > 0).to(output.dtype).expand_as(output)
        return F.binary_cross_entropy_with_logits(output, signs)

    def is_flipped(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the tested attribute's logit sign differs from the origin's (paper eq. 10)."""
        if origin_output.shape[-1] != output.shape[-1] or origin_output.shape[0] not in (1, output.shape[0]):
            raise ValueError(f"origin output {tuple(origin_output.shape)} does not match output {tuple(output.shape)}")
        origin = origin_output.to(output.device).expand_as(output)
        index = target.to(output.device).long().view(-1, 1)
        if index.shape[0] == 1:  # one case's tested attribute, for every row of a batch (a population)
            index = index.expand(output.shape[0], 1)
        return ((output.gather(1, index) > 0) != (origin.gather(1, index) > 0)).view(-1)

    def is_valid_origin(self, origin_output: torch.Tensor, condition: int | None) -> torch.Tensor:
        """Every origin is a test case (the paper's CelebA origins are unconditional); with ``condition`` 0 or 1,
        only origins whose tested attribute decision equals it (e.g. 1: test only faces predicted as smiling)."""
        if condition is None:
            return torch.ones(origin_output.shape[0], dtype=torch.bool, device=origin_output.device)
        if condition not in (0, 1):
            raise ValueError(f"a binary SUT's condition is the tested attribute's decision, 0 or 1, got {condition}")
        return self.prediction(origin_output) == int(condition)

    # --- the baselines' margin ------------------------------------------------------------------------
    def decision_margin(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """:func:`attribute_margin` of the case's tested attribute (``target``)."""
        return attribute_margin(output.float(), origin_output.float(), int(target[0]))

    # --- as the validity oracle -----------------------------------------------------------------------
    def judge_reading(self, output: torch.Tensor, target: int | None) -> tuple[int, float]:
        """Whether logit ``target`` (the case's tested attribute, or the class a detection case suppresses: a
        multi-label "class k is present" judge) is positive, and the probability of that reading."""
        p = float(output.float()[0, target].sigmoid())
        return int(p > 0.5), max(p, 1 - p)

    # --- a finished record ----------------------------------------------------------------------------
    @classmethod
    def recorded_decisions(cls, record: CaseRecord) -> tuple[int | None, int | None]:
        """The sign of the case's tested logit (``target``) in origin and result; the recorded labels when the
        logits are missing."""
        if record.target is not None and record.origin_pred and record.result_pred:
            return int(record.origin_pred[record.target] > 0), int(record.result_pred[record.target] > 0)
        return record.origin_label, record.result_label

    @classmethod
    def case_metrics(cls, origin: torch.Tensor, result: torch.Tensor, target: int,
                     equations: ModuleType) -> dict[str, float | None] | None:
        """Eq. 10 (the tested attribute's sign changed) and the escape ratio (eq. 14, with other attributes)."""
        o, r = origin.reshape(1, -1), result.reshape(1, -1)
        if not 0 <= target < o.shape[1]:
            return None
        esc = float(equations.binary_escape_ratio(o, r, target)) if o.shape[1] > 1 else None
        return {"mr": float(equations.binary_misclassification_rate(o, r, target)), "esc": esc, "cr": None}
