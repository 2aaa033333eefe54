"""Test-input generation methods, one LightningModule per test case."""

from hynea_pl.methods.base import CaseResult, TestCaseModule, UnsupportedTaskError
from hynea_pl.methods.hynea import HyNeACase, NonFiniteLossError
from hynea_pl.methods.hynea_options import Acceptance, PaperSearch, RealismPrior, Retries, Steering
from hynea_pl.methods.batched import BatchedHyNeA  # after HyNeACase: it registers as its batched form

__all__ = ["Acceptance", "BatchedHyNeA", "CaseResult", "HyNeACase", "NonFiniteLossError", "PaperSearch", "RealismPrior",
           "Retries", "Steering", "TestCaseModule", "UnsupportedTaskError"]
