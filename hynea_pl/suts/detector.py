"""One-stage detector SUT (ultralytics YOLOv8): differentiable top-k detections from the raw pre-NMS outputs.

``forward(images (B, C, H, W) in [0, 1]) -> logits (B, k, nc)`` (k = ``top_k`` = 5 by default):

- the images are resized to ``imgsz x imgsz`` (bilinear, antialiased; no letterbox: the generator's square image is
  the whole scene), RGB, [0, 1] -- what ultralytics feeds its models;
- the torch module (``YOLO(...).model``, a ``DetectionModel``) runs in eval mode and returns ``(y, preds)``;
  ``preds["scores"]`` ``(B, nc, N)`` are the **raw class logits** of all N anchor candidates (ultralytics'
  confidences are their sigmoid, ``y[:, 4:]``);
- candidates are ranked by their maximum class confidence (max sigmoid = sigmoid of the max logit, so ranking
  by the max logit is the same) and the top k are kept, most confident first. The output is their raw logits:
  the selection indices carry no gradient, the selected logits do, so gradients reach the input image.

Task semantics (paper eqs. 6, 11, 15; REFERENCE.md):

- target: the class to suppress ``(B,)``: ``class_id`` when configured, else the argmax class of the origin's most
  confident detection;
- "runner-up" class of a detection: its most likely class other than the target (``exclude_target: true``, the
  default). For a detection that predicts the target this is exactly its second most likely class; for one that
  already predicts another class it is that class (so the loss never pushes a detection *toward* the suppressed
  class, which the literal "second most likely class" would do when the target ranks second).
  ``exclude_target: false`` gives the literal second most likely class;
- behaviour loss: mean cross entropy (softmax over classes) of the current top-k detections toward the runner-up
  classes of the origin's top-k detections, fixed once per case (:meth:`YOLODetectorSUT.objective_labels`,
  REFERENCE.md: one-hot of each origin detection's second class, the control signal's labels too);
- flip: no top-k detection's argmax is the target class;
- control: one-hot of each origin top-k detection's runner-up class, ``(B, nc, k)`` (classes first, for the control
  projector's Conv1d-over-classes branch);
- confidence reduction (eq. 15): :func:`hynea_pl.metrics.functional.task.confidence_reduction` on the logits
  (``from_logits=True``), the one implementation the records and ``evaluate`` share.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from hynea_pl.paths import resolve_path
from hynea_pl.suts.base import SUT
from hynea_pl.suts.preprocess import Preprocess
from hynea_pl.suts.binary import BinaryAttributeSUT

if TYPE_CHECKING:
    from hynea_pl.schema import CaseRecord


def load_yolo(model: str | nn.Module, nc: int | None = None) -> nn.Module:
    """The ultralytics ``DetectionModel`` of a ``.pt`` checkpoint (local path), or untrained from a ``.yaml``
    (a local file or an ultralytics built-in config name such as ``yolov8n.yaml``; ``nc`` overrides its classes)."""
    if isinstance(model, nn.Module):
        return model
    text = str(model)
    if text.endswith((".yaml", ".yml")):
        from ultralytics.nn.tasks import DetectionModel

        return DetectionModel(text, nc=nc, verbose=False)
    path = resolve_path(text)
    if not path.is_file():  # ultralytics would try to download a missing asset: fail here instead
        raise FileNotFoundError(f"YOLO checkpoint not found: {path}")
    from ultralytics.nn.tasks import load_checkpoint

    detector, _ = load_checkpoint(str(path))
    return detector.float()


def _class_logits(raw) -> torch.Tensor:
    """Raw class logits ``(B, nc, N)`` from a DetectionModel's eval output."""
    if isinstance(raw, (tuple, list)) and len(raw) == 2 and isinstance(raw[1], dict) and "scores" in raw[1]:
        return raw[1]["scores"]
    y = raw[0] if isinstance(raw, (tuple, list)) else raw
    if not torch.is_tensor(y) or y.ndim != 3:  # pragma: no cover - other ultralytics layouts
        raise TypeError("unsupported YOLO output: expected (y, {'scores': ...}) or y (B, 4 + nc, N)")
    return torch.logit(y[:, 4:].clamp(1e-6, 1 - 1e-6))


def _detection_cross_entropy(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy of the k detections ``(B, k, nc)`` toward ``labels (B or 1, k)``."""
    labels = labels.to(output.device).expand(output.shape[0], -1)
    return F.cross_entropy(output.flatten(0, 1), labels.flatten())


def detection_margin(logits: torch.Tensor, cls: int) -> torch.Tensor:
    """``(B,)`` for top-k detection logits ``(B, k, nc)``: the largest, over the k detections, of the class's logit
    minus that detection's best other logit; negative once no detection's argmax is ``cls`` (the detection flip)."""
    if logits.ndim != 3 or logits.shape[-1] < 2:
        raise ValueError(f"expected detection logits (B, k, nc >= 2), got shape {tuple(logits.shape)}")
    own = logits[..., cls]
    others = logits.clone()
    others[..., cls] = -math.inf
    return (own - others.max(dim=-1).values).max(dim=-1).values


class YOLODetectorSUT(SUT):
    """An ultralytics YOLOv8 detector under test; see the module docstring.

    ``model``: a ``.pt`` path, a ``.yaml`` (untrained; ``nc`` sets its classes) or a ``DetectionModel``.
    ``weights``: optional state dict to load into it. ``imgsz``: input size, a multiple of the largest stride (32).
    ``origin_confidence``: a valid origin's detection of the case's class must also have a confidence above this
    (0: the paper's rule, any top-k detection whose argmax is the class).
    ``origin_top_k``: ``"any"`` (the paper's rule): the class is the argmax of at least one top-k detection;
    ``"all"``: of every one, so the case's top-k are all detections of the class under test (eq. 11, which compares
    the top-k by rank, then counts only changes of that class's detections).
    """

    task = "detection"
    misclassification_is_flip = False  # eq. 11 is the fraction of top-k detections whose class changed

    def __init__(self, model: str | nn.Module = "yolov8n.pt", imgsz: int = 640, class_id: int | None = None,
                 top_k: int = 5, nc: int | None = None, weights: str | None = None, strict: bool = True,
                 exclude_target: bool = True, origin_confidence: float = 0.0, origin_top_k: str = "any") -> None:
        if origin_top_k not in ("any", "all"):
            raise ValueError(f"origin_top_k must be 'any' or 'all', got {origin_top_k!r}")
        detector = load_yolo(model, nc=nc)
        stride = int(max(getattr(detector, "stride", torch.tensor([32.0])).tolist()))
        if imgsz % stride:
            raise ValueError(f"imgsz must be a multiple of the model stride {stride}, got {imgsz}")
        super().__init__(detector, weights=weights, preprocess=Preprocess(size=imgsz, channels=3), strict=strict)
        self.imgsz = imgsz
        self.class_id = class_id
        self.top_k = top_k
        self.exclude_target = exclude_target
        self.origin_confidence = origin_confidence
        self.origin_top_k = origin_top_k
        self.names = dict(getattr(detector, "names", {}) or {})

    @property
    def num_classes(self) -> int:
        return int(self.model.nc) if hasattr(self.model, "nc") else len(self.names)

    # --- forward ------------------------------------------------------------------------------------
    def candidate_logits(self, images: torch.Tensor) -> torch.Tensor:
        """Raw class logits of all pre-NMS candidates ``(B, nc, N)``."""
        return _class_logits(self.model(self.preprocess(images)))

    def detect(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Top-k detections: ``logits`` (B, k, nc), ``indices`` (B, k) into the N candidates, ``boxes`` (B, k, 4)
        as xywh in ``imgsz`` pixels."""
        raw = self.model(self.preprocess(images))
        scores = _class_logits(raw)
        if scores.shape[-1] < self.top_k:
            raise ValueError(f"the detector has {scores.shape[-1]} candidates, fewer than top_k={self.top_k}")
        indices = scores.amax(1).topk(self.top_k, dim=-1).indices  # (B, k), most confident first
        logits = scores.transpose(1, 2).gather(1, indices.unsqueeze(-1).expand(-1, -1, scores.shape[1]))
        y = raw[0] if isinstance(raw, (tuple, list)) else raw
        boxes = y[:, :4].transpose(1, 2).gather(1, indices.unsqueeze(-1).expand(-1, -1, 4))
        return {"logits": logits, "indices": indices, "boxes": boxes}

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.detect(images)["logits"]

    @torch.no_grad()
    def boxes(self, images: torch.Tensor) -> list[list[list[float]]]:
        """Per image ``(B, C, H, W)``, its top-k detections as ``[x0, y0, x1, y1, class, confidence]`` in the
        image's own pixels (most confident first; confidence = the sigmoid of the class logit)."""
        found = self.detect(images)
        sx, sy = images.shape[-1] / self.imgsz, images.shape[-2] / self.imgsz
        xywh = found["boxes"].float()
        corners = torch.stack([(xywh[..., 0] - xywh[..., 2] / 2) * sx, (xywh[..., 1] - xywh[..., 3] / 2) * sy,
                               (xywh[..., 0] + xywh[..., 2] / 2) * sx, (xywh[..., 1] + xywh[..., 3] / 2) * sy], -1)
        best = found["logits"].float().max(-1)
        rows = torch.cat([corners, best.indices.unsqueeze(-1).float(), best.values.sigmoid().unsqueeze(-1)], -1)
        return [[[round(float(v), 4) for v in row] for row in image] for image in rows.cpu()]

    # --- task semantics -------------------------------------------------------------------------------
    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        """The class of the most confident detection ``(B,)``."""
        best = output.amax(-1).argmax(-1)  # the most confident of the k (the first, as forward sorts them)
        return output[torch.arange(output.shape[0], device=output.device), best].argmax(-1)

    def default_target(self, origin_output: torch.Tensor, condition: int | None = None) -> torch.Tensor:
        """The class to suppress ``(B,)``: ``class_id``, else the case's class (paper 4.5: a driving case is drawn
        for a class and suppresses it), else the origin's most confident detection's class."""
        chosen = self.class_id if self.class_id is not None else condition
        if chosen is not None:
            return torch.full(origin_output.shape[:1], int(chosen), dtype=torch.long, device=origin_output.device)
        return self.prediction(origin_output)

    def runner_up(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Each detection's runner-up class ``(B, k)`` (see the module docstring)."""
        output = output.detach()
        if not self.exclude_target:
            return output.topk(2, dim=-1).indices[..., 1]
        index = target.to(output.device).long().view(-1, 1, 1).expand(-1, output.shape[1], 1)
        return output.scatter(-1, index, float("-inf")).argmax(-1)

    def objective_labels(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The runner-up class of each origin top-k detection ``(B, k)``, fixed for the whole case."""
        return self.runner_up(origin_output, target)

    def behaviour_loss(self, output: torch.Tensor, labels: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean cross entropy of the k detections ``(B, k, nc)`` toward ``labels (B, k)`` (paper eq. 6)."""
        return _detection_cross_entropy(output, labels)

    def keep_loss(self, output: torch.Tensor, origin_output: torch.Tensor) -> torch.Tensor:
        """Mean cross entropy of the top-k detections ``(B, k, nc)`` toward the origin's top-k classes, rank by
        rank (a reference detector's preservation term: keep detecting what the origin shows)."""
        return _detection_cross_entropy(output, origin_output.detach().argmax(-1))

    def is_flipped(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: no top-k detection predicts the class to suppress any more."""
        return (output.argmax(-1) != target.to(output.device).view(-1, 1)).all(-1)

    def control_signal(self, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """One-hot of each origin detection's runner-up class, classes first ``(B, nc, k)``."""
        labels = self.objective_labels(origin_output, target)
        return F.one_hot(labels, origin_output.shape[-1]).to(origin_output.dtype).transpose(1, 2)

    def is_valid_origin(self, origin_output: torch.Tensor, condition: int | None) -> torch.Tensor:
        """With a ``condition`` class: it is the argmax of at least one top-k detection (paper 4.5) whose
        confidence exceeds ``origin_confidence``; with ``origin_top_k: all``, also of every top-k detection."""
        if condition is None:
            return torch.ones(origin_output.shape[0], dtype=torch.bool, device=origin_output.device)
        best = origin_output.max(-1)
        of_class = best.indices == int(condition)
        valid = (of_class & (best.values.sigmoid() > self.origin_confidence)).any(-1)
        return valid & of_class.all(-1) if self.origin_top_k == "all" else valid

    # --- the baselines' margin ------------------------------------------------------------------------
    def decision_margin(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """:func:`detection_margin` of the class to suppress (``target``)."""
        return detection_margin(output.float(), int(target[0]))

    # --- the record of a result -----------------------------------------------------------------------
    def decision_fields(self, origin_output: torch.Tensor, output: torch.Tensor, target: torch.Tensor,
                        origin_image: torch.Tensor, result_image: torch.Tensor,
                        equations: ModuleType) -> dict[str, Any]:
        """``confidence_reduction`` (eq. 15 on the logits) and, for the galleries (paper Fig. 6), the top-k boxes on
        origin and result (``origin_boxes`` / ``result_boxes``; a re-read of images already scored, not a SUT
        evaluation of a new image)."""
        reduction = equations.confidence_reduction(origin_output, output, target, from_logits=True)
        return {"confidence_reduction": float(reduction),
                "origin_boxes": self.boxes(origin_image.to(origin_output.device))[0],
                "result_boxes": self.boxes(result_image)[0]}

    # --- as the validity oracle -----------------------------------------------------------------------
    def judge_reading(self, output: torch.Tensor, target: int | None) -> tuple[int, float]:
        """Whether any top-k detection still predicts class ``target``, and the class's best confidence."""
        logits = output.float()[0]
        present = bool((logits.argmax(-1) == target).any())
        return int(present), float(logits[:, target].sigmoid().max())

    # --- a finished record ----------------------------------------------------------------------------
    @classmethod
    def judged_by(cls, oracle_task: str) -> bool:
        """A detector, or a multi-label attribute model whose logit ``k`` says "class k is present"."""
        return oracle_task in (cls.task, BinaryAttributeSUT.task)

    @classmethod
    def recorded_decisions(cls, record: CaseRecord) -> tuple[int | None, int | None]:
        """1 in the origin (a case starts from a detection of its class), then 1 while the class is still among
        the top-k (0 once flipped)."""
        return 1, int(not record.flipped)

    @classmethod
    def case_metrics(cls, origin: torch.Tensor, result: torch.Tensor, target: int,
                     equations: ModuleType) -> dict[str, float | None] | None:
        """Eq. 11 (the fraction of the k detections whose class changed) and eq. 15 (confidence reduction of the
        suppressed class, from the logits); no escape ratio."""
        if origin.dim() != 2 or not 0 <= target < origin.shape[-1]:
            return None
        o, r = origin.unsqueeze(0), result.unsqueeze(0)
        return {"mr": float(equations.detection_misclassification_rate(o, r)), "esc": None,
                "cr": float(equations.confidence_reduction(o, r, target, from_logits=True))}


__all__ = ["YOLODetectorSUT", "detection_margin", "load_yolo"]
