"""The system-under-test interface: a frozen model plus the task semantics HyNeA, the baselines, the campaign and
the metrics need.

A task is one :class:`SUT` subclass that sets ``task`` (the record's ``task``: ``ClassifierSUT``,
``BinaryAttributeSUT``, ``YOLODetectorSUT``); everything that depends on the task is a method of it, so nothing
outside :mod:`hynea_pl.suts` compares task names:

- the search: :meth:`SUT.prediction`, :meth:`SUT.is_flipped`, :meth:`SUT.behaviour_loss`, ... and
  :meth:`SUT.decision_margin` (how far an output still holds the origin's decision, the baselines' fitness and
  tie-breaker);
- the record of a result: :meth:`SUT.decision_fields` (detection: confidence reduction and the top-k boxes);
- the oracle, when the SUT judges: :meth:`SUT.judge_reading`, :meth:`SUT.judge_labels`;
- a finished record, read without a model (class methods, found by :func:`~hynea_pl.suts.tasks.task_class` from
  ``record.task``):
  :meth:`SUT.judged_by`, :meth:`SUT.recorded_decisions`, :meth:`SUT.reference_decision`,
  :meth:`SUT.case_metrics`, and the flags ``decision_is_class``, ``target_is_class`` and
  ``misclassification_is_flip``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from hynea_pl.checkpoints import read_state_dict
from hynea_pl.paths import resolve_path
from hynea_pl.suts.preprocess import Preprocess, as_preprocess

if TYPE_CHECKING:
    from hynea_pl.schema import CaseRecord

#: Each task's SUT class by task name, in the order they were defined (a subclass that sets ``task`` registers;
#: :mod:`hynea_pl.suts.tasks` looks them up with every built-in task loaded).
TASK_CLASSES: dict[str, type[SUT]] = {}


def load_state_dict(location: str | Path) -> dict[str, torch.Tensor]:
    """A SUT's state dict from a ``.safetensors`` / ``.pt`` / ``.pth`` / ``.ckpt`` file (or ``zoo://`` URI); a
    missing file is a one-line ``FileNotFoundError`` naming it (:func:`hynea_pl.checkpoints.read_state_dict`)."""
    path = resolve_path(location)
    if not path.is_file():
        raise FileNotFoundError(f"SUT checkpoint not found: {path}")
    return read_state_dict(path)


class SUT(nn.Module):
    """A frozen model under test: ``forward(images (B, C, H, W) in [0, 1]) -> outputs``.

    Subclasses define the task: the behaviour loss toward a target, the flip criterion and the control
    signal fed to the HyperNet's projector.
    """

    task: str = "abstract"

    #: the SUT's decision, in the case's terms, is one class of many (multiclass: which class the image shows), not
    #: whether the case's attribute or class holds (binary, detection: present / absent). Then a judge can read a
    #: third class (an ``ambiguous`` verdict) and origin class x SUT label is a confusion matrix.
    decision_is_class: ClassVar[bool] = False
    #: the case's target is one of the generator's classes (a class to reach or to suppress), not an attribute
    target_is_class: ClassVar[bool] = True
    #: the per-case misclassification indicator (:meth:`case_metrics` ``"mr"``) is the flip itself (multiclass,
    #: binary); detection's eq. 11 is a fraction of detections instead
    misclassification_is_flip: ClassVar[bool] = True

    #: its family is its model's (:func:`hynea_pl.suts.family.model_families`)
    family_members = ("model",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "task" in cls.__dict__:  # a new task: the first class that names it owns it
            TASK_CLASSES.setdefault(cls.task, cls)

    def __init__(self, model: nn.Module, weights: str | None = None, preprocess: Preprocess | nn.Module | None = None,
                 strict: bool = True) -> None:
        """``preprocess``: how the model expects its input (:mod:`hynea_pl.suts.preprocess`), a :class:`Preprocess`
        (YAML: its fields as a mapping) or a ``torchvision.transforms.v2`` pipeline that runs on tensor batches
        (YAML: ``class_path`` + ``init_args``); ``None``: the images as they are."""
        super().__init__()
        if weights is not None:
            state = load_state_dict(weights)
            try:
                model.load_state_dict(state, strict=strict)
            except RuntimeError as error:
                first = str(error).strip().splitlines()[0]
                raise ValueError(f"SUT checkpoint {weights} does not fit {type(model).__name__}: {first}") from None
        self.model = model.eval().requires_grad_(False)
        self.preprocess = as_preprocess(preprocess)

    def train(self, mode: bool = True) -> SUT:
        """The SUT always stays in eval mode (dropout / batch norm frozen)."""
        return super().train(False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(self.preprocess(images))

    # --- task semantics -------------------------------------------------------------------------------
    # Every test takes the origin's output explicitly: a case fixes its target and objective once from the origin
    # (``default_target``, ``objective_labels``, ``control_signal``) and the SUT keeps no per-case state.
    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        """The SUT's decision ``(B,)`` for each output (class index; the tested attribute's 0/1; the class of the
        most confident detection)."""
        raise NotImplementedError

    def default_target(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The target of a case ``(B,)`` when none is configured; ``condition`` is the case's class."""
        raise NotImplementedError

    def target_candidates(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The targets a case may aim at, first to last ``(B, N)``: a search that misses its target may aim at the
        next (HyNeA's later runs). Column 0 is :meth:`default_target`; a task with one natural target has ``N = 1``."""
        return self.default_target(origin_output, condition).unsqueeze(-1)

    def objective_labels(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """What the behaviour loss pulls toward, fixed once from the origin (classes, BCE targets, ...)."""
        raise NotImplementedError

    def behaviour_loss(self, output: torch.Tensor, labels: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Scalar loss of ``output`` toward ``labels`` (from :meth:`objective_labels`) for ``target``."""
        raise NotImplementedError

    def control_signal(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The control fed to the HyperNet's projector (REFERENCE.md: one-hot / signs / per-detection one-hot)."""
        raise NotImplementedError

    def is_flipped(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the decision left the origin's (the one meaning of ``flipped`` for every method)."""
        raise NotImplementedError

    def reaches_target(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the output reached the case's target. Tasks whose target is the change itself (an
        attribute to flip, a class to suppress) reach it exactly when they flip."""
        return self.is_flipped(output, origin_output, target)

    def is_valid_origin(self, origin_output: torch.Tensor, condition: int | None) -> torch.Tensor:
        """``(B,)`` bool: the origin is a test case of ``condition`` (paper 4.5)."""
        raise NotImplementedError

    def keeps(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor,
              margin: float = 0.0) -> torch.Tensor:
        """``(B,)`` bool: ``output`` keeps the origin's decision (a reference model's stop condition); ``margin``:
        how sure it must be, where the task defines a confidence (multiclass: the origin class's probability)."""
        return ~self.is_flipped(output, origin_output, target)

    def keep_loss(self, output: torch.Tensor, origin_output: torch.Tensor) -> torch.Tensor:
        """Scalar loss that is low while ``output`` keeps the origin's decisions (a reference model's
        preservation term: fail the SUT while the reference keeps the label)."""
        raise NotImplementedError(f"{type(self).__name__} ({self.task}) has no preservation loss")

    def has_margin(self, output: torch.Tensor) -> bool:
        """Whether :meth:`decision_margin` can read ``output`` (a search breaks ties with zeros otherwise)."""
        return True

    def decision_margin(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)``: how far each output ``(B, ...)`` still holds the origin's decision on ``origin_output (1, ...)``
        for the case's ``target (1,)``: positive while it holds, negative once flipped (the baselines' fitness and
        tie-breaker)."""
        raise NotImplementedError(f"{type(self).__name__} ({self.task}) has no decision margin")

    # --- the record of a result ------------------------------------------------------------------------------
    def decision_fields(self, origin_output: torch.Tensor, output: torch.Tensor, target: torch.Tensor,
                        origin_image: torch.Tensor, result_image: torch.Tensor,
                        equations: ModuleType) -> dict[str, Any]:
        """The task's own record fields for a result ``output`` (of ``result_image (1, C, H, W)``, as saved) and
        its origin (``origin_image``): none by default (detection: ``confidence_reduction`` and the top-k boxes).
        ``equations``: the task metrics, :mod:`hynea_pl.metrics.functional.task` (handed over by the caller:
        the metrics import the SUTs, never the other way round)."""
        return {}

    # --- as the validity oracle -------------------------------------------------------------------------------
    def judge_reading(self, output: torch.Tensor, target: int | None) -> tuple[int, float]:
        """This model's decision on one output ``(1, ...)`` as a judge of a case whose target is ``target``, in the
        task's terms, and its probability."""
        raise ValueError(f"no validity rule for an oracle of task {self.task!r}")

    def judge_labels(self, output: torch.Tensor, images: torch.Tensor,
                     target: int | None) -> tuple[list[int], dict[str, int] | None]:
        """Each judge's decision on a result (its ``images (1, C, H, W)`` and this model's ``output`` on them), and
        the same by judge name for a panel of named judges (``None``: one judge, this model's reading)."""
        return [self.judge_reading(output, target)[0]], None

    @property
    def reads_no_class(self) -> bool:
        """Whether this model, as a validity oracle, can answer that an image shows none of the classes (the zoo
        judges' "not a digit"): then that answer is the verdict's realism part and a realism test is only recorded."""
        return False

    def verdict_ceiling(self, realism: nn.Module | None) -> float | None:
        """The verdict's ceiling (:mod:`hynea_pl.evaluation.ceiling`) when this model judges with ``realism``: the
        fraction of real test images of a known class that it and the realism test call valid, where it has been
        measured (``None``: unknown; the zoo's judges have it in their zoo's gates)."""
        return None

    # --- a finished record, read without a model --------------------------------------------------------------
    @classmethod
    def judged_by(cls, oracle_task: str) -> bool:
        """Whether an oracle of ``oracle_task`` can judge this task's cases: the same task by default."""
        return oracle_task == cls.task

    @classmethod
    def recorded_decisions(cls, record: CaseRecord) -> tuple[int | None, int | None]:
        """The SUT's decisions on origin and result of a record, in the oracle's terms: the recorded labels by
        default."""
        return record.origin_label, record.result_label

    @classmethod
    def reference_decision(cls, record: CaseRecord, judges_origin_label: int) -> int:
        """The decision a result must keep to be a valid failure, in the oracle's terms: the SUT's own decision on
        the origin (the case's premise) by default, else the judges' reading of the origin."""
        sut_origin = cls.recorded_decisions(record)[0]
        return sut_origin if sut_origin is not None else judges_origin_label

    @classmethod
    def case_metrics(cls, origin: torch.Tensor, result: torch.Tensor, target: int,
                     equations: ModuleType) -> dict[str, float | None] | None:
        """A record's per-case task metrics from its raw outputs ``origin_pred`` / ``result_pred`` (same shape,
        float64) and ``target``, by ``equations`` (:mod:`hynea_pl.metrics.functional.task`, handed over by the
        caller): ``mr`` (the eq. 9-11 misclassification indicator), ``esc`` (escape ratio) and ``cr`` (confidence
        reduction), ``None`` where undefined; ``None`` when the outputs are unusable."""
        raise NotImplementedError(f"{cls.__name__} ({cls.task}) has no task metrics")
