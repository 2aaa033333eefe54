"""Test-input generation methods, one LightningModule per test case."""

from hynea_pl.methods.base import CaseResult, TestCaseModule, UnsupportedTaskError
from hynea_pl.methods.hynea import HyNeACase, NonFiniteLossError

__all__ = ["CaseResult", "HyNeACase", "NonFiniteLossError", "TestCaseModule", "UnsupportedTaskError"]
