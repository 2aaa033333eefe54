"""Callbacks shared by HyNeA and every baseline: flip early stop, the SUT-evaluation budget, image logging."""

from hynea_pl.callbacks.budget import SUTEvaluationBudget
from hynea_pl.callbacks.flip import FlipEarlyStopping
from hynea_pl.callbacks.images import CaseImageLogger

__all__ = ["CaseImageLogger", "FlipEarlyStopping", "SUTEvaluationBudget"]
