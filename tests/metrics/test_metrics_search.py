"""Search metrics: budget / runtime summaries, seeds per valid input and fault rate."""

import math

import pytest
import torch

from hynea_pl.metrics import Runtime, SUTEvaluations
from hynea_pl.metrics.functional import fault_rate, seeds_per_valid, summarize


def test_summaries():
    s = summarize([1, 2, 3, 10])
    assert (s["n"], s["total"], s["mean"], s["median"], s["min"], s["max"]) == (4, 16.0, 4.0, 2.5, 1.0, 10.0)
    assert s["std"] == pytest.approx(math.sqrt(((3**2) + 2**2 + 1 + 6**2) / 3))
    single = summarize([7])
    assert single["mean"] == 7 and single["median"] == 7 and math.isnan(single["std"])
    assert summarize([])["n"] == 0 and math.isnan(summarize([])["mean"])
    m = SUTEvaluations()
    m.update(torch.tensor([1, 2]))
    m.update(3)
    m.update([10, float("inf")])  # values that are not finite are left out
    m.update(None)
    out = m.compute()
    assert out["median"] == 2.5 and out["total"] == 16 and out["n"] == 4
    merged, other = SUTEvaluations(), SUTEvaluations()
    merged.update([1, 2])
    other.update([3, 10])
    merged.merge_state(other)  # states reduce like a DDP sync
    assert merged.compute() == out
    r = Runtime()
    r.update([0.5, 1.5])
    assert r.compute()["mean"] == 1.0


def test_seeds_per_valid_and_fault_rate():
    assert seeds_per_valid(42, 1) == 42.0
    assert seeds_per_valid(5, 0) == math.inf
    preds = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.5, 0.5]])  # labels 0, 1, 1, 0 (tie)
    assert fault_rate(preds, 0).item() == pytest.approx(2 / 4)
    assert fault_rate(preds, 0, valid=torch.tensor([True, True, False, False])).item() == pytest.approx(1 / 2)
    assert math.isnan(fault_rate(preds, 0, valid=torch.zeros(4, dtype=torch.bool)).item())
    assert fault_rate(torch.tensor([1, 1, 2]), torch.tensor([1, 2, 2])).item() == pytest.approx(1 / 3)
