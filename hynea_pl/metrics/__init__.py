"""Metrics of HyNeA, the latent-truncation study and SINVAD, as torchmetrics ``Metric`` classes with plain
functional twins in :mod:`hynea_pl.metrics.functional`.

A pure library: it computes numbers from tensors, labels and features, and imports nothing of the zoo, the
campaign, the report or the evaluation layer. Reading run folders and running the judging models is
:mod:`hynea_pl.evaluation`'s job; a baseline's constants (the truncation schedules) live with the baseline.

- Task (HyNeA eqs. 9-15): :class:`MisclassificationRate`, :class:`EscapeRatio`, :class:`ConfidenceReduction`.
- Image: :class:`MultiScaleSSIM` (scales chosen for the image size), :class:`SSIM`, :class:`L2Distance`,
  :class:`ScreeningGate`, :class:`LPIPS`, :class:`FrechetInceptionDistance`; :func:`ms_ssim` convenience.
- Embedding: :class:`EmbeddingDiversity` (eq. 7), :class:`TraceDifference` (eq. 8), :class:`PairwiseLPIPSDiversity`.
- Search: :class:`SUTEvaluations`, :class:`Runtime`, :class:`SeedsPerValidInput`, :class:`FaultRate`,
  :class:`FirstFlipPsi`, :class:`PredictionVariability`, :class:`ClassEscapeMatrix`.
- Human study: :class:`FleissKappa`, :class:`WilcoxonSignedRank`, :class:`CohensD`.
- Weights: :class:`MetricUnavailable`, :func:`unavailable_entry`, :func:`metric_entry`.
- Realism against real images: :class:`Realism`, :func:`realism_scores` (FID / KID / PRDC on chosen features),
  :func:`realism_features` (the zoo's features and reference digits: :mod:`hynea_pl.zoo.mnist.realism`; a run folder's
  realism: :func:`hynea_pl.evaluation.run_realism`).
- Validity: the pure verdict of a case, :func:`hynea_pl.metrics.functional.validity.verdict`; the realism test
  :class:`~hynea_pl.metrics.typicality.TypicalityTest`.
"""

from hynea_pl.metrics.backbones import InceptionFeatures, LPIPSDistance, ResNetEmbedder
from hynea_pl.metrics.embedding import EmbeddingDiversity, PairwiseLPIPSDiversity, TraceDifference, embed, resnet50_embedder
from hynea_pl.metrics.functional.image import MSSSIMConfig, ms_ssim, select_ms_ssim_config
from hynea_pl.metrics.image import (
    LPIPS,
    SSIM,
    FrechetInceptionDistance,
    L2Distance,
    MultiScaleSSIM,
    ScreeningGate,
    frechet_distance,
)
from hynea_pl.metrics.realism import Realism, realism_features, realism_scores
from hynea_pl.metrics.search import (
    ClassEscapeMatrix,
    FaultRate,
    FirstFlipPsi,
    PredictionVariability,
    Runtime,
    SeedsPerValidInput,
    SummaryStatistics,
    SUTEvaluations,
)
from hynea_pl.metrics.stats import CohensD, FleissKappa, WilcoxonSignedRank
from hynea_pl.metrics.task import (
    BinaryEscapeRatio,
    BinaryMisclassificationRate,
    ConfidenceReduction,
    DetectionMisclassificationRate,
    EscapeRatio,
    MisclassificationRate,
    MulticlassEscapeRatio,
    MulticlassMisclassificationRate,
)
from hynea_pl.metrics.weights import MetricUnavailable, metric_entry, resolve_checkpoint, unavailable_entry

__all__ = [
    "LPIPS",
    "SSIM",
    "BinaryEscapeRatio",
    "BinaryMisclassificationRate",
    "ClassEscapeMatrix",
    "CohensD",
    "ConfidenceReduction",
    "DetectionMisclassificationRate",
    "EmbeddingDiversity",
    "EscapeRatio",
    "FaultRate",
    "FirstFlipPsi",
    "FleissKappa",
    "FrechetInceptionDistance",
    "InceptionFeatures",
    "L2Distance",
    "LPIPSDistance",
    "MSSSIMConfig",
    "MetricUnavailable",
    "MisclassificationRate",
    "MultiScaleSSIM",
    "MulticlassEscapeRatio",
    "MulticlassMisclassificationRate",
    "PairwiseLPIPSDiversity",
    "PredictionVariability",
    "Realism",
    "ResNetEmbedder",
    "Runtime",
    "SUTEvaluations",
    "ScreeningGate",
    "SeedsPerValidInput",
    "SummaryStatistics",
    "TraceDifference",
    "WilcoxonSignedRank",
    "embed",
    "frechet_distance",
    "metric_entry",
    "ms_ssim",
    "realism_features",
    "realism_scores",
    "resnet50_embedder",
    "resolve_checkpoint",
    "select_ms_ssim_config",
    "unavailable_entry",
]
