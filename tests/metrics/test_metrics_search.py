"""Search metrics: budget/runtime summaries, seeds per valid input, fault rate, first-flip psi, SINVAD's
prediction variability under MC dropout and the targeted class-escape matrix."""

import math

import pytest
import torch
from torch import nn

from hynea_pl.metrics import (
    ClassEscapeMatrix,
    FaultRate,
    FirstFlipPsi,
    PredictionVariability,
    Runtime,
    SeedsPerValidInput,
    SUTEvaluations,
)
from hynea_pl.metrics.functional import (
    class_escape_matrix,
    fault_rate,
    first_flip_psi,
    first_flip_statistics,
    mc_dropout_probs,
    prediction_variability,
    seeds_per_valid,
    summarize,
)


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
    m.update([10])
    out = m.compute()
    assert out["median"].item() == 2.5 and out["total"].item() == 16
    r = Runtime()
    r.update([0.5, 1.5])
    assert r.compute()["mean"].item() == 1.0


def test_seeds_per_valid_and_fault_rate():
    assert seeds_per_valid(42, 1) == 42.0
    assert seeds_per_valid(5, 0) == math.inf
    m = SeedsPerValidInput()
    m.update(torch.tensor([True, False, False]))
    m.update([False, True, False, False, False])
    assert m.compute().item() == pytest.approx(8 / 2)
    m.update(1, n_seeds=4)
    assert m.compute().item() == pytest.approx(12 / 3)

    preds = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.5, 0.5]])  # labels 0, 1, 1, 0 (tie)
    assert fault_rate(preds, 0).item() == pytest.approx(2 / 4)
    assert fault_rate(preds, 0, valid=torch.tensor([True, True, False, False])).item() == pytest.approx(1 / 2)
    assert math.isnan(fault_rate(preds, 0, valid=torch.zeros(4, dtype=torch.bool)).item())
    assert fault_rate(torch.tensor([1, 1, 2]), torch.tensor([1, 2, 2])).item() == pytest.approx(1 / 3)
    f = FaultRate()
    f.update(preds[:2], 0)
    f.update(preds[2:], torch.tensor([1, 1]), valid=torch.tensor([True, False]))
    assert f.compute().item() == pytest.approx(1 / 3)  # 3 valid cases, only the second is misclassified


def test_first_flip():
    sched = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)  # the truncation probes' fixed schedule
    assert first_flip_psi(torch.tensor([3, 3, 5, 3, 3, 3]), 3, sched) == 0.8
    assert first_flip_psi(torch.tensor([3] * 6), 3, sched) is None  # never flips
    assert first_flip_psi(torch.tensor([5, 3, 3, 3, 3, 3]), 3, sched) is None  # baseline fails: rejected
    assert first_flip_psi(torch.tensor([5, 3, 3, 3, 3, 3]), 3, sched, require_baseline=False) == 1.0
    scores = torch.zeros(6, 4)
    scores[:, 2] = 1.0
    scores[4, 0] = 2.0
    assert first_flip_psi(scores, 2, sched) == 0.6
    with pytest.raises(ValueError):
        first_flip_psi(torch.tensor([3, 3]), 3, sched)
    stats = first_flip_statistics([0.8, None, 0.6, 0.8], schedule=sched)
    assert stats["n_seeds"] == 4 and stats["n_flipped"] == 3 and stats["flip_rate"] == 0.75
    assert stats["median_psi"] == pytest.approx(0.8) and stats["mean_psi"] == pytest.approx(2.2 / 3)
    assert stats["counts"][0.8] == 2 and stats["counts"][0.6] == 1 and stats["counts"][1.0] == 0
    m = FirstFlipPsi(schedule=sched)
    m.update([0.8, None])
    m.update(torch.tensor([0.6, float("nan")]))
    out = m.compute()
    assert out["n_seeds"] == 4 and out["n_flipped"] == 2 and out["min_psi"] == pytest.approx(0.6)
    empty = first_flip_statistics([None, None])
    assert empty["flip_rate"] == 0.0 and math.isnan(empty["mean_psi"])


def test_prediction_variability_hand_values():
    # two dropout samples, opposite one-hot predictions: std per class = sqrt(0.5) -> V = 2 sqrt(0.5)
    assert prediction_variability(torch.tensor([[1.0, 0.0], [0.0, 1.0]])).item() == pytest.approx(math.sqrt(2))
    # identical predictions: 0
    assert prediction_variability(torch.tensor([[0.3, 0.7]] * 5)).item() == 0.0
    # one sample: undefined
    assert math.isnan(prediction_variability(torch.tensor([[0.3, 0.7]])).item())
    batch = torch.stack([torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[0.5, 0.5]] * 2)])
    assert prediction_variability(batch).tolist() == pytest.approx([math.sqrt(2), 0.0])
    m = PredictionVariability()
    m.update(batch)
    assert m.compute().item() == pytest.approx(math.sqrt(2) / 2)


def test_mc_dropout_keeps_batchnorm_in_eval_and_restores_modes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
    model.train()
    x = torch.randn(2, 4)
    probs = mc_dropout_probs(model, x, n=20)
    assert probs.shape == (2, 20, 3)
    assert torch.allclose(probs.sum(-1), torch.ones(2, 20))
    assert (prediction_variability(probs) > 0).all()
    assert all(m.training for m in model.modules())  # restored
    assert model[1].num_batches_tracked.item() == 0  # batch norm ran in eval mode
    with pytest.raises(ValueError, match="no dropout"):
        mc_dropout_probs(nn.Linear(4, 3), x, n=2)


def test_class_escape_matrix():
    source = torch.tensor([0, 0, 0, 1, 1, 2])
    target = torch.tensor([1, 1, 2, 0, 0, 1])
    success = torch.tensor([True, False, True, True, True, False])
    rates, attempts, successes = class_escape_matrix(source, target, success, 3)
    assert attempts.tolist() == [[0, 2, 1], [2, 0, 0], [0, 1, 0]]
    assert successes.tolist() == [[0, 1, 1], [2, 0, 0], [0, 0, 0]]
    assert rates[0, 1] == 0.5 and rates[0, 2] == 1.0 and rates[1, 0] == 1.0 and rates[2, 1] == 0.0
    assert torch.isnan(rates[0, 0]) and torch.isnan(rates[1, 2])
    m, other = ClassEscapeMatrix(3), ClassEscapeMatrix(3)
    m.update(source[:3], target[:3], success[:3])
    other.update(source[3:], target[3:], success[3:])
    m.merge_state(other)
    assert torch.allclose(m.compute(), rates, equal_nan=True)
    with pytest.raises(ValueError):
        class_escape_matrix(torch.tensor([3]), torch.tensor([0]), torch.tensor([True]), 3)
