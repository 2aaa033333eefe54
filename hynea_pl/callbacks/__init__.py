"""Callbacks shared by HyNeA and every baseline: flip early stop and the SUT-evaluation budget."""

from hynea_pl.callbacks.budget import SUTEvaluationBudget
from hynea_pl.callbacks.flip import FlipEarlyStopping

__all__ = ["FlipEarlyStopping", "SUTEvaluationBudget"]
