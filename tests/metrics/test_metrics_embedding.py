"""Embedding diversity (eq. 7), trace difference (eq. 8, l1 form of A.1), pairwise distance diversity."""

import math
import warnings

import pytest
import torch

from hynea_pl.metrics import EmbeddingDiversity, LPIPSDistance, TraceDifference, embed
from hynea_pl.metrics.functional import (
    embedding_diversity,
    pairwise_distance_diversity,
    trace_difference,
    trace_difference_full,
)

T = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731


def test_diversity_hand_values_and_edge_cases():
    e = T([[0.0, 0.0], [2.0, 4.0]])
    # per-dim unbiased variances 2 and 8 -> mean 5; population variances 1 and 4 -> 2.5
    assert embedding_diversity(e).item() == pytest.approx(5.0)
    assert embedding_diversity(e, unbiased=False).item() == pytest.approx(2.5)
    # all-equal embeddings: no diversity
    assert embedding_diversity(T([[1.5, -2.0, 3.0]] * 4)).item() == 0.0
    # a single sample: unbiased variance undefined -> NaN; population variance 0
    assert math.isnan(embedding_diversity(T([[1.0, 2.0]])).item())
    assert embedding_diversity(T([[1.0, 2.0]]), unbiased=False).item() == 0.0
    with pytest.raises(ValueError):
        embedding_diversity(torch.zeros(3))


def test_trace_difference_hand_values_and_l1_form():
    e0 = T([[0.0, 0.0], [2.0, 4.0]])  # variances (2, 8)
    et = T([[1.0, 1.0], [1.0, 3.0]])  # variances (0, 2)
    assert trace_difference(e0, et).item() == pytest.approx(abs(2 - 0) + abs(8 - 2))
    assert trace_difference(e0, e0).item() == 0.0
    # equal spread around different means: no difference (only variances count)
    assert trace_difference(e0, e0 + 10).item() == pytest.approx(0.0, abs=1e-12)
    # A.1: tr(|cov0 - covt|) from full, correlated covariance matrices == l1 distance of their diagonals
    g = torch.Generator().manual_seed(0)
    mix = torch.randn(6, 6, generator=g, dtype=torch.float64)
    a = torch.randn(30, 6, generator=g, dtype=torch.float64) @ mix
    b = torch.randn(25, 6, generator=g, dtype=torch.float64) @ mix.T * 0.5
    full = trace_difference_full(a, b)
    assert full.item() == pytest.approx(trace_difference(a, b).item(), rel=1e-12)
    diag_l1 = (torch.diag(torch.cov(a.T)) - torch.diag(torch.cov(b.T))).abs().sum()
    assert full.item() == pytest.approx(diag_l1.item(), rel=1e-12)
    # cross-dimensional correlations are discarded: the entry-wise l1 of the full difference is larger
    assert (torch.cov(a.T) - torch.cov(b.T)).abs().sum() > full
    # single sample -> NaN
    assert math.isnan(trace_difference(a[:1], b).item())
    with pytest.raises(ValueError):
        trace_difference(a, b[:, :3])


def test_stateful_embedding_metrics_with_embedder():
    embedder = lambda x: x.flatten(1)[:, :2]  # noqa: E731 - any images -> (B, D) callable
    images = T([[0.0, 0.0], [2.0, 4.0], [1.0, 1.0], [1.0, 3.0]]).view(4, 1, 1, 2)
    div = EmbeddingDiversity(embedder=embedder)
    div.update(images[:1])
    div.update(images[1:2])
    assert div.compute().item() == pytest.approx(5.0)
    div.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(div.compute().item())
    td = TraceDifference(embedder=embedder)
    td.update(images[:2], images[2:])
    assert td.compute().item() == pytest.approx(8.0)
    # DDP-style merge of two partial states
    part = TraceDifference()
    rest = TraceDifference()
    e = embed(embedder, images)
    part.update(e[:1], e[2:3])
    rest.update(e[1:2], e[3:4])
    part.merge_state(rest)
    assert part.compute().item() == pytest.approx(8.0)


def test_pairwise_diversity_hand_value_and_lpips():
    l1 = lambda a, b: (a - b).abs().flatten(1).mean(1)  # noqa: E731
    images = T([0.0, 0.2, 0.6]).view(3, 1, 1, 1).expand(3, 1, 2, 2)
    # pairs: 0.2, 0.6, 0.4 -> mean 0.4
    assert pairwise_distance_diversity(images, l1).item() == pytest.approx(0.4)
    assert pairwise_distance_diversity(images, l1, batch_size=1).item() == pytest.approx(0.4)
    assert math.isnan(pairwise_distance_diversity(images[:1], l1).item())
    # real LPIPS module (random backbone: tests only): identical images are not diverse
    with pytest.warns(UserWarning):
        lpips = LPIPSDistance("squeeze", pnet_rand=True)
    same = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)).expand(3, -1, -1, -1)
    assert pairwise_distance_diversity(same, lpips).item() == pytest.approx(0.0, abs=1e-6)
