"""Plain-function twins of the metrics in :mod:`hynea_pl.metrics` (no state, no DDP)."""

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
from hynea_pl.metrics.functional.search import (
    class_escape_matrix,
    fault_rate,
    first_flip_psi,
    first_flip_statistics,
    mc_dropout_probs,
    prediction_variability,
    seeds_per_valid,
    summarize,
)
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
    "MSSSIMConfig",
    "STANDARD_BETAS",
    "binary_escape_ratio",
    "binary_misclassification_rate",
    "class_escape_matrix",
    "cohens_d",
    "confidence_reduction",
    "detection_misclassification_rate",
    "embedding_diversity",
    "escape_ratio",
    "fault_rate",
    "first_flip_psi",
    "first_flip_statistics",
    "fleiss_kappa",
    "l2_distance",
    "mc_dropout_probs",
    "misclassification_rate",
    "ms_ssim",
    "multiscale_ssim",
    "pairwise_distance_diversity",
    "per_dim_variance",
    "prediction_variability",
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
