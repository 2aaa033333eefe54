"""Test-input generation methods, one LightningModule per test case."""

from hynea_pl.methods.base import CaseResult, TestCaseModule, UnsupportedTaskError
from hynea_pl.methods.hynea import HyNeACase, NonFiniteLossError
from hynea_pl.methods.batched import BatchedHyNeA  # after HyNeACase: it registers as its batched form

__all__ = ["BatchedHyNeA", "CaseResult", "HyNeACase", "NonFiniteLossError", "TestCaseModule", "UnsupportedTaskError"]
