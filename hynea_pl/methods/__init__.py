"""Test-input generation methods, one LightningModule per test case."""

from hynea_pl.methods.hynea import CaseResult, HyNeACase, NonFiniteLossError

__all__ = ["CaseResult", "HyNeACase", "NonFiniteLossError"]
