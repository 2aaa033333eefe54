"""The stability verdict: variants of a saved result, and whether a flip holds on them."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hynea_pl.evaluation.rescore import stability_columns
from hynea_pl.evaluation.stability import StabilityVariants, stability_fields
from hynea_pl.images import shift_image
from hynea_pl.methods.views import SearchViews
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import ClassifierSUT


class CentrePixelReader(nn.Module):
    """Class 1 when the pixel at (5, 5) is brighter than 0.5, else class 0: logits ``(B, 2)``."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        pixel = images[:, 0, 5, 5]
        return torch.stack([torch.zeros_like(pixel), 10 * (pixel - 0.5)], dim=1)


@pytest.fixture
def sut() -> ClassifierSUT:
    return ClassifierSUT(CentrePixelReader())


def blank() -> torch.Tensor:
    return torch.zeros(1, 1, 12, 12)


def test_the_default_variants_lie_beyond_the_searchs_views_and_add_a_blur():
    variants = StabilityVariants()
    assert variants.names == ["shift_up", "shift_down", "shift_left", "shift_right", "rotation_-8", "rotation_8",
                              "brightness_0.8", "brightness_1.2", "blur_0.8"]
    views = SearchViews()
    assert variants.shift > views.shift and min(variants.rotation) < -views.rotation
    assert max(variants.rotation) > views.rotation
    assert min(variants.brightness) < 1 - views.brightness and max(variants.brightness) > 1 + views.brightness
    assert variants.blur and views.blur == 0  # a change the search does not draw


def test_variants_are_named_shifted_brightened_and_saved_as_8_bit():
    variants = StabilityVariants(shift=1, rotation=[], brightness=[0.9, 1.1], blur=[])
    assert variants.names == ["shift_up", "shift_down", "shift_left", "shift_right", "brightness_0.9",
                              "brightness_1.1"]
    image = blank()
    value = 150 / 255
    image[0, 0, 5, 5] = value
    views = variants(image)
    assert views.shape == (6, 1, 12, 12) and len(variants) == 6
    bright = views > 0
    assert bright[0, 0, 4, 5] and bright[1, 0, 6, 5]  # up moves the pixel one row up, down one row down
    assert bright[2, 0, 5, 4] and bright[3, 0, 5, 6]  # left / right
    assert bright.flatten(1).sum(1).tolist() == [1] * 6
    assert float(views[0].max()) == pytest.approx(value, abs=1e-6)
    assert float(views[4, 0, 5, 5]) == pytest.approx(135 / 255, abs=1e-6)
    assert float(views[5, 0, 5, 5]) == pytest.approx(165 / 255, abs=1e-6)
    assert torch.equal(views, (views * 255).round() / 255)


def test_rotations_scalings_contrast_and_blur_are_variants_too():
    variants = StabilityVariants(shift=0, rotation=[90], scale=[1.2], brightness=[], contrast=[0.5], blur=[0.8])
    assert variants.names == ["rotation_90", "scale_1.2", "contrast_0.5", "blur_0.8"]
    image = blank()
    image[0, 0, 2, 6] = 1.0
    views = variants(image)
    assert views.shape == (4, 1, 12, 12) and torch.equal(views, (views * 255).round() / 255)
    assert divmod(int(views[0].flatten().argmax()), 12) == (6, 9)  # a clockwise quarter turn about (5.5, 5.5)
    assert float(views[3].max()) < 0.5 < float(views[3].sum())  # the blur spreads the pixel


def test_a_shift_repeats_the_edge_and_keeps_the_shape():
    image = torch.arange(16.0).view(1, 1, 4, 4)
    moved = shift_image(image, 0, 2, mode="replicate")
    assert moved.shape == image.shape
    assert torch.equal(moved[0, 0, :, 2:], image[0, 0, :, :2])
    assert torch.equal(moved[0, 0, :, 0], image[0, 0, :, 0])  # the uncovered column repeats the edge


def test_a_boundary_failure_does_not_hold_but_a_robust_one_does(sut):
    origin_output = sut(blank())
    target = torch.tensor([1])
    on_the_edge = blank()
    on_the_edge[0, 0, 5, 5] = 1.0  # one pixel: every shift moves it off (5, 5) and undoes the flip
    robust = blank()
    robust[0, 0, 3:8, 3:8] = 1.0  # a block: every shift and brightness keeps (5, 5) bright
    narrow = StabilityVariants(shift=1, rotation=[], brightness=[0.9, 1.1], blur=[])
    for image, expected_held in ((on_the_edge, 2), (robust, 6)):
        assert bool(sut.is_flipped(sut(image), origin_output, target)[0])
        fields = stability_fields(sut, narrow, image, origin_output, target, flipped=True)
        assert fields == {"stability_variants": 6, "stability_held": expected_held}


def test_no_fields_without_a_flip_or_without_variants(sut):
    origin_output, target = sut(blank()), torch.tensor([1])
    assert stability_fields(sut, StabilityVariants(), blank(), origin_output, target, flipped=False) == {}
    assert stability_fields(sut, None, blank(), origin_output, target, flipped=True) == {}
    off = StabilityVariants(enabled=False)
    assert stability_fields(sut, off, blank(), origin_output, target, flipped=True) == {}


def test_bad_variants_are_one_line_errors():
    with pytest.raises(ValueError, match=r"stability.shift = -1"):
        StabilityVariants(shift=-1)
    with pytest.raises(ValueError, match=r"stability.brightness"):
        StabilityVariants(brightness=[0.0])
    with pytest.raises(ValueError, match=r"stability.blur"):
        StabilityVariants(blur=[0.0])


def record(i: int, **fields) -> CaseRecord:
    return CaseRecord(method="m", run="r", task="multiclass", case_id=f"c0-{i}", seed=i, origin_class=0, **fields)


def test_stable_rates_count_over_all_cases():
    cases = [record(0, flipped=True, verdict="valid_failure", stability_variants=6, stability_held=6, sut_evals=10),
             record(1, flipped=True, verdict="valid_failure", stability_variants=6, stability_held=5, sut_evals=20),
             record(2, flipped=True, verdict="semantic_change", stability_variants=6, stability_held=6, sut_evals=30),
             record(3, flipped=False, verdict="no_flip", sut_evals=40)]
    # the evaluations of every case (100) per stable valid failure (1)
    assert stability_columns(cases) == {"stable_flip_rate": 0.5, "stable_failure_rate": 0.25,
                                        "sut_evals_per_stable_failure": 100.0}
    unchecked = [record(0, flipped=True, verdict="valid_failure")]
    assert stability_columns(unchecked) == {"stable_flip_rate": None, "stable_failure_rate": None,
                                            "sut_evals_per_stable_failure": None}
