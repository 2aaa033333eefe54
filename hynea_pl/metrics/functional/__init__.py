"""The metrics' definitions as plain functions (no state, no DDP); the Metric classes of :mod:`hynea_pl.metrics` call them."""

from hynea_pl.metrics.functional.embedding import (
    embedding_diversity,
    pairwise_distance_diversity,
    per_dim_variance,
    trace_difference,
    trace_difference_full,
)
from hynea_pl.metrics.functional.image import (
    STANDARD_BETAS,
    MSSSIMConfig,
    l2_distance,
    ms_ssim,
    multiscale_ssim,
    screening_gate,
    select_ms_ssim_config,
    ssim,
)
from hynea_pl.metrics.functional.search import fault_rate, seeds_per_valid, summarize
from hynea_pl.metrics.functional.stats import cohens_d, fleiss_kappa, ratings_to_table, wilcoxon_signed_rank
from hynea_pl.metrics.functional.task import (
    binary_escape_ratio,
    binary_misclassification_rate,
    confidence_reduction,
    detection_misclassification_rate,
    escape_ratio,
    misclassification_rate,
    top2,
)

__all__ = [
    "STANDARD_BETAS",
    "MSSSIMConfig",
    "binary_escape_ratio",
    "binary_misclassification_rate",
    "cohens_d",
    "confidence_reduction",
    "detection_misclassification_rate",
    "embedding_diversity",
    "escape_ratio",
    "fault_rate",
    "fleiss_kappa",
    "l2_distance",
    "misclassification_rate",
    "ms_ssim",
    "multiscale_ssim",
    "pairwise_distance_diversity",
    "per_dim_variance",
    "ratings_to_table",
    "screening_gate",
    "seeds_per_valid",
    "select_ms_ssim_config",
    "ssim",
    "summarize",
    "top2",
    "trace_difference",
    "trace_difference_full",
    "wilcoxon_signed_rank",
]
