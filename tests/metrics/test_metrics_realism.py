"""Realism (FID / KID / PRDC through torchmetrics and prdc) on known features, and its unavailable paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import linalg
from torch import nn

from hynea_pl.metrics import MetricUnavailable, realism_features, realism_scores

KEYS = {"fid", "kid_mean", "kid_std", "kid_subset_size", "kid_subsets", "precision", "recall", "density", "coverage",
        "prdc_nearest_k", "n_images", "n_reference", "features"}


def points(n: int, seed: int, shift: float = 0.0, scale: float = 1.0) -> torch.Tensor:
    """``n`` correlated 3-d Gaussian points as "images" ``(n, 1, 1, 3)`` (nn.Flatten gives the features)."""
    g = torch.Generator().manual_seed(seed)
    mix = torch.tensor([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.2, -0.3, 0.7]])
    return ((torch.randn(n, 3, generator=g) @ mix) * scale + shift).view(n, 1, 1, 3)


def scipy_fid(a: np.ndarray, b: np.ndarray) -> float:
    """The reference Fréchet formula with scipy's sqrtm (Heusel et al. 2017)."""
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    root = linalg.sqrtm(s_a @ s_b).real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a + s_b - 2 * root))


def test_fid_of_a_set_against_itself_is_zero():
    x = points(200, 0)
    scores = realism_scores(x, x, nn.Flatten())
    assert set(scores) == KEYS
    assert abs(scores["fid"]) < 1e-8


def test_fid_matches_the_scipy_formula_on_known_features():
    images, reference = points(300, 1, shift=0.7, scale=1.5), points(400, 2)
    linear = nn.Linear(3, 2)  # a known linear feature map: FID in its 2-d space
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.0, -0.5, 0.2], [0.3, 0.8, -1.0]]))
        linear.bias.zero_()
    features = nn.Sequential(nn.Flatten(), linear)
    scores = realism_scores(images, reference, features)
    with torch.no_grad():
        fa, fb = (features(t).double().numpy() for t in (images, reference))
    assert scores["fid"] == pytest.approx(scipy_fid(fa, fb), rel=1e-6)
    assert scores["fid"] > 1.0
    assert (scores["n_images"], scores["n_reference"], scores["features"]) == (300, 400, "Sequential")


def test_kid_is_about_zero_for_one_distribution_and_positive_for_shifted_sets():
    reference = points(300, 3)
    same = realism_scores(points(300, 4), reference, nn.Flatten())
    shifted = realism_scores(points(300, 4, shift=1.5), reference, nn.Flatten())
    assert shifted["kid_mean"] > 10 * shifted["kid_std"] / np.sqrt(100)
    assert abs(same["kid_mean"]) < 0.05 * shifted["kid_mean"]
    assert shifted["fid"] > same["fid"]
    assert same["kid_subset_size"] == 50 and same["kid_subsets"] == 100
    again = realism_scores(points(300, 4, shift=1.5), reference, nn.Flatten())
    assert again["kid_mean"] == shifted["kid_mean"]  # subsets drawn from a fixed seed


def test_small_sets_state_their_subset_size_and_unavailable_prdc():
    scores = realism_scores(points(4, 5), points(30, 6), nn.Flatten())
    assert scores["kid_subset_size"] == 4 and scores["n_images"] == 4
    assert realism_scores(points(40, 5), points(30, 6), nn.Flatten(), kid_subset_size=20)["kid_subset_size"] == 20
    with pytest.raises(ValueError, match=">= 2 images"):
        realism_scores(points(1, 5), points(30, 6), nn.Flatten())


def test_precision_recall_density_coverage_through_prdc():
    pytest.importorskip("prdc")
    reference = points(300, 3)
    same = realism_scores(reference, reference, nn.Flatten())
    assert same["precision"] == same["recall"] == same["coverage"] == 1.0 and same["prdc_nearest_k"] == 5
    shifted = realism_scores(points(300, 4, shift=1.5), reference, nn.Flatten())
    assert shifted["precision"] < 0.9 and shifted["coverage"] < 0.5
    small = realism_scores(points(4, 5), reference, nn.Flatten())
    assert small["precision"]["value"] is None and "needs >= 7 images" in small["precision"]["unavailable"]


def test_prdc_entries_are_unavailable_without_the_package(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "prdc", None)  # import prdc raises ImportError
    scores = realism_scores(points(30, 5), points(30, 6), nn.Flatten())
    assert scores["coverage"] == {"value": None, "unavailable": "the prdc package is not installed"}
    assert scores["fid"] > 0


def test_inception_features_are_unavailable_without_local_weights(empty_torch_home, offline):
    with pytest.raises(MetricUnavailable, match="inception_v3") as info:
        realism_features("inception")
    assert str(empty_torch_home) in info.value.reason
    with pytest.raises(MetricUnavailable, match="configured local path"):
        realism_features("inception", weights_path=empty_torch_home / "missing.pth")


def test_the_zoo_reference_is_its_held_out_digits():
    from hynea_pl.zoo.labelled.realism import held_out_digits
    from hynea_pl.zoo.mnist.data import mnist_test_digits

    reference = held_out_digits("full")
    assert reference.shape == (10000, 1, 32, 32) and 0.0 <= reference.min() and reference.max() <= 1.0
    assert torch.equal(reference, mnist_test_digits()[0])
    assert torch.equal(held_out_digits("tiny"), reference[:200])


@pytest.mark.slow
def test_zoo_embedder_features_put_noise_far_from_the_held_out_digits(tiny_zoo):
    from hynea_pl.zoo.labelled.realism import held_out_digits, zoo_realism_features
    from hynea_pl.zoo.mnist.data import load_digits
    from hynea_pl.zoo.profiles import get_profile

    features = zoo_realism_features("tiny")
    reference = held_out_digits("tiny")
    digits = load_digits(get_profile("tiny").data).method.train_images[:60]
    real = realism_scores(digits, reference, features, kid_subsets=20)
    noise = realism_scores(torch.rand(60, 1, 32, 32, generator=torch.Generator().manual_seed(0)), reference,
                           features, kid_subsets=20)
    assert real["features"] == "zoo:tiny/embedder" and real["n_reference"] == 200
    assert noise["fid"] > 10 * real["fid"] and noise["kid_mean"] > real["kid_mean"]
