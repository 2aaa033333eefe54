"""HyNeA's options in groups: the paper's search, and each extension the shipped default adds to it.

Each group is one argument of :class:`~hynea_pl.methods.hynea.HyNeACase` (``model.init_args.<group>.<option>`` in a
config or on the command line, e.g. ``--model.init_args.search.lr_max 1e-3``); the measured effect of each is in
``docs/methods.md``. The paper's HyNeA is :class:`PaperSearch` with every extension off
(``configs/overlays/hynea_paper.yaml``);
the views of the image (expectation over transformations) are :class:`~hynea_pl.methods.views.SearchViews`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, OpenUnitInterval, PositiveFloat, PositiveInt

from hynea_pl.methods.acceptance import AcceptanceTest
from hynea_pl.suts import SUT


@dataclass
class PaperSearch:
    """The paper's search (sections 2.3 and 3): AdamW with a OneCycle schedule on ``distance + behaviour``.

    Args:
        lr_min: AdamW's learning rate and the start / end of the OneCycle schedule.
        lr_max: OneCycle's peak learning rate.
        pct_start: fraction of the cycle spent increasing the learning rate.
        total_steps: OneCycle length; default ``trainer.max_steps``.
        weight_decay: AdamW weight decay.
        normalize_behaviour: divide the behaviour term by its first-step value (as the authors did).
        stop_on: ``"target"`` (the paper: the SUT predicts the target) or ``"flip"`` (its decision left the origin's).
    """

    lr_min: PositiveFloat = 1e-4
    lr_max: PositiveFloat = 1e-3
    pct_start: OpenUnitInterval = 0.3
    total_steps: PositiveInt | None = None
    weight_decay: NonNegativeFloat = 1e-2
    normalize_behaviour: bool = True
    stop_on: Literal["target", "flip"] = "target"

    def __post_init__(self) -> None:
        if not 0 < self.lr_min <= self.lr_max:
            raise ValueError(f"search needs 0 < lr_min <= lr_max, got {self.lr_min} and {self.lr_max}")
        if not 0 < self.pct_start < 1:
            raise ValueError(f"search.pct_start must be in (0, 1), got {self.pct_start}")
        if self.weight_decay < 0:
            raise ValueError(f"search.weight_decay must be >= 0, got {self.weight_decay}")
        if self.stop_on not in ("target", "flip"):
            raise ValueError(f"search.stop_on must be 'target' or 'flip', got {self.stop_on!r}")


@dataclass
class Steering:
    """A second model of the SUT's task that must keep the origin's decision while the SUT's changes: the steering
    model of the shipped default (the zoo's ``steer-cnn``), or a second SUT for differential testing. Its evaluations
    are not SUT evaluations; it must never be the campaign's ``oracle`` (the campaign checks).

    Args:
        model: the model; ``None``: no steering (the paper).
        weight: weight of its preservation loss (``SUT.keep_loss``: cross entropy to its reading of the origin) in the
            loss; 0: it only enters the stop rule.
        stop: a step counts as found only while the model keeps the origin's decision.
        margin: how sure the model must be that it does (multiclass: the origin class's probability; 0: its argmax).
        views: the model judges the image, its one-pixel shifts and a lower-contrast copy
            (:func:`hynea_pl.images.shifted_views`) and keeps the decision only when it does on all of them.
    """

    model: SUT | None = None
    weight: NonNegativeFloat = 1.0
    stop: bool = True
    margin: ClosedUnitInterval = 0.0
    views: bool = False

    def __post_init__(self) -> None:
        if self.weight < 0 or not 0 <= self.margin <= 1:
            raise ValueError(f"steering needs weight >= 0 and margin in [0, 1], got {self.weight} and {self.margin}")


@dataclass
class Acceptance:
    """When a step that reaches the target counts as the case's result, beyond the paper's rule.

    Args:
        test: the method's own check (:class:`~hynea_pl.methods.acceptance.AcceptanceTest`, of models and data no
            judge uses): a step counts as found only when it accepts the image as a member of the origin's class, so
            the search goes on past a rejected flip; ``None``: none (the paper).
        margin: how far past its decision boundary the SUT must be, in the units of :meth:`SUT.decision_margin`
            (a classifier: the best other logit minus the origin class's logit); 0: the first step across (the
            paper). Read on the image itself: no extra SUT evaluation.
        margin_ratio: the same margin as a fraction of the SUT's own margin on the origin, so that it means the same
            for any SUT; the larger of the two applies.
    """

    test: AcceptanceTest | None = None
    margin: NonNegativeFloat = 0.0
    margin_ratio: NonNegativeFloat = 0.0

    def __post_init__(self) -> None:
        if self.margin < 0 or self.margin_ratio < 0:
            raise ValueError(f"acceptance.margin and margin_ratio must be >= 0, got {self.margin}, {self.margin_ratio}")


@dataclass
class Retries:
    """More runs of a case within its budget: a run that ends without a found result is followed by a fresh HyperNet
    (the case loop starts it, :mod:`hynea_pl.campaign.runner`; in a batch, beside the case's other runs when slots are
    free). The record keeps every run's target, evaluations and steps (``diagnostics.attempts``).

    Args:
        attempts: runs per case (1: the paper); the budget ends a case first when it cannot pay for one more step.
        retarget: with no explicit target, run ``n`` aims at the SUT's candidate target ``n``
            (:meth:`SUT.target_candidates`: a classifier's second most likely class on the origin, then the third, ...,
            round again after the last); ``False``: every run aims at the first.
    """

    attempts: PositiveInt = 1
    retarget: bool = True

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retries.attempts must be >= 1, got {self.attempts}")


@dataclass
class RealismPrior:
    """The frozen denoiser's own denoising loss on the adapted latents (:meth:`DiffusionGenerator.denoising_loss`)
    added to the loss, at a timestep drawn per step from ``timesteps`` (fractions of the training schedule).

    Args:
        weight: its weight; 0: none (the paper).
        timesteps: the range of those timesteps.
    """

    weight: NonNegativeFloat = 0.0
    timesteps: tuple[float, float] = (0.2, 0.6)

    def __post_init__(self) -> None:
        low, high = self.timesteps
        if self.weight < 0:
            raise ValueError(f"prior.weight must be >= 0, got {self.weight}")
        if not 0 <= low <= high <= 1:
            raise ValueError(f"prior.timesteps must be 0 <= low <= high <= 1, got {self.timesteps}")


__all__ = ["Acceptance", "PaperSearch", "RealismPrior", "Retries", "Steering"]
