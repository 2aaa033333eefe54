"""The metrics a run is scored with: torchmetrics ``Metric`` classes updated per case and computed per run, and the
definitions they call, as plain functions, in :mod:`hynea_pl.metrics.functional`.

A pure library: it computes numbers from case records, tensors and features, and imports nothing of the zoo, the
campaign, the report or the evaluation layer. Reading run folders and running the judging models is
:mod:`hynea_pl.evaluation`'s job; a baseline's constants (the truncation schedules) live with the baseline.

- Task (HyNeA eqs. 9-15, ``update(record)``): :class:`MisclassificationRate`, :class:`EscapeRatio`,
  :class:`ConfidenceReduction`; :func:`case_values` (one case's values).
- Cost (HyNeA 4.2.2): :class:`SUTEvaluations`, :class:`Runtime`; their base :class:`SummaryStatistics`.
- Image: :class:`MultiScaleSSIM` (scales chosen for the image size), :class:`LPIPS`; :func:`ms_ssim` convenience.
- Embedding: :class:`EmbeddingDiversity` (eq. 7), :class:`TraceDifference` (eq. 8).
- Weights: :class:`MetricUnavailable`, :func:`unavailable_entry`, :func:`metric_entry`.
- Realism against real images: :func:`realism_scores` (FID / KID / PRDC on chosen features), :func:`realism_features`
  (the zoo's features and reference digits: :mod:`hynea_pl.zoo.labelled.realism`; a run folder's realism:
  :func:`hynea_pl.evaluation.run_realism`).
- Validity: the pure verdict of a case, :func:`hynea_pl.metrics.functional.validity.verdict`; the realism test
  :class:`~hynea_pl.metrics.typicality.TypicalityTest`.
"""

from hynea_pl.metrics._base import SummaryStatistics
from hynea_pl.metrics.backbones import InceptionFeatures, LPIPSDistance, ResNetEmbedder
from hynea_pl.metrics.embedding import EmbeddingDiversity, TraceDifference, embed, resnet50_embedder
from hynea_pl.metrics.functional.image import MSSSIMConfig, ms_ssim, select_ms_ssim_config
from hynea_pl.metrics.image import LPIPS, MultiScaleSSIM
from hynea_pl.metrics.realism import realism_features, realism_scores
from hynea_pl.metrics.search import Runtime, SUTEvaluations
from hynea_pl.metrics.task import ConfidenceReduction, EscapeRatio, MisclassificationRate, case_values
from hynea_pl.metrics.weights import MetricUnavailable, metric_entry, resolve_checkpoint, unavailable_entry

__all__ = [
    "LPIPS",
    "ConfidenceReduction",
    "EmbeddingDiversity",
    "EscapeRatio",
    "InceptionFeatures",
    "LPIPSDistance",
    "MSSSIMConfig",
    "MetricUnavailable",
    "MisclassificationRate",
    "MultiScaleSSIM",
    "ResNetEmbedder",
    "Runtime",
    "SUTEvaluations",
    "SummaryStatistics",
    "TraceDifference",
    "case_values",
    "embed",
    "metric_entry",
    "ms_ssim",
    "realism_features",
    "realism_scores",
    "resnet50_embedder",
    "resolve_checkpoint",
    "select_ms_ssim_config",
    "unavailable_entry",
]
