"""Judges that read like people (issue: the verdict's redesign): the panel's decision (a calibrated vote or unanimity,
"not a digit", undecided), the changes people read through (hynea_pl.zoo.augment), the images that show no digit
(hynea_pl.zoo.outliers), a judge's training step with its "not a digit" label, and the tiny zoo's judges as a panel.

The verdict's rules on these readings: tests/metrics/test_metrics_validity.py; on images: tests/test_verdict_realism.py
and tests/test_ceiling.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT
from hynea_pl.suts.ensemble import panel_decisions
from hynea_pl.verdicts import NOT_A_CLASS, UNDECIDED
from hynea_pl.zoo.augment import (
    erase_cells, gaussian_blur, random_blur, random_dimming, random_erasure, random_lighting, random_occlusion,
    rectangles,
)
from hynea_pl.zoo.labelled.config import (
    ConvMixerJudgeConfig, ConvMixerOracleConfig, JudgeConfig, OracleConfig, PeopleChanges, VoteConfig,
)
from hynea_pl.zoo.labelled.oracle import OracleNet, OracleTraining, augment, oracle_network, with_not_digits
from hynea_pl.zoo.outliers import NOT_DIGIT_KINDS, not_digits, scribbles


def seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def strokes(n: int = 16, size: int = 32, seed: int = 0) -> torch.Tensor:
    """``(n, 1, size, size)``: a digit-like figure per image, a vertical and a horizontal bar of 3 px at random places
    and grey levels in [0.6, 1] on a black background."""
    generator, images = seeded(seed), torch.zeros(n, 1, size, size)
    for i in range(n):
        y, x = torch.randint(4, size - 18, (2,), generator=generator).tolist()
        level = 0.6 + 0.4 * torch.rand(1, generator=generator).item()
        images[i, 0, y : y + 14, x : x + 3] = level
        images[i, 0, y + 6 : y + 9, x : x + 12] = level
    return images


def probs(*rows: list[list[float]]) -> torch.Tensor:
    """Member probabilities ``(M, N, K)``: one list of per-image rows per member."""
    return torch.tensor(rows, dtype=torch.float32)


# ------------------------------------------------------------------------------------------- the panel's decision
def test_a_vote_names_the_class_whose_mean_probability_reaches_the_threshold():
    member_probs = probs(
        [[0.9, 0.1, 0.0], [0.6, 0.4, 0.0], [0.2, 0.8, 0.0], [1.0, 0.0, 0.0]],
        [[0.8, 0.2, 0.0], [0.2, 0.8, 0.0], [0.2, 0.2, 0.6], [0.0, 1.0, 0.0]],
        [[0.1, 0.9, 0.0], [0.4, 0.6, 0.0], [0.1, 0.9, 0.0], [0.0, 0.0, 1.0]],
    )  # means: class 0 0.6; class 1 0.6; class 1 0.633; a three-way split (1/3 each)
    decisions = panel_decisions(member_probs, threshold=0.55)
    assert decisions.dtype == torch.long and decisions.tolist() == [0, 1, 1, UNDECIDED]
    # under the threshold: undecided, though one class is the most probable
    assert panel_decisions(member_probs, threshold=0.62).tolist() == [UNDECIDED, UNDECIDED, 1, UNDECIDED]
    assert panel_decisions(member_probs, threshold=1.0).tolist() == [UNDECIDED] * 4
    # reaching it is enough (>=): a mean of exactly the threshold
    assert panel_decisions(probs([[1.0, 0.0]], [[0.5, 0.5]]), threshold=0.75).tolist() == [0]
    assert panel_decisions(probs([[1.0, 0.0]], [[0.5, 0.5]]), threshold=0.76).tolist() == [UNDECIDED]


def test_without_a_threshold_the_judges_must_be_unanimous():
    member_probs = probs(
        [[0.9, 0.1, 0.0], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5], [0.34, 0.33, 0.33]],
        [[0.8, 0.2, 0.0], [0.2, 0.8, 0.0], [0.1, 0.4, 0.5], [0.4, 0.3, 0.3]],
        [[0.51, 0.49, 0.0], [0.4, 0.6, 0.0], [0.0, 0.0, 1.0], [0.9, 0.1, 0.0]],
    )
    # unanimity reads each judge's first choice, however unsure (image 3), and refuses any split (image 1: the mean
    # vote would read 1)
    assert panel_decisions(member_probs).tolist() == [0, UNDECIDED, 2, 0]
    assert panel_decisions(member_probs, threshold=None).tolist() == [0, UNDECIDED, 2, 0]
    assert panel_decisions(member_probs[:1]).tolist() == [0, 0, 2, 0], "one judge decides alone"


def test_the_not_a_class_output_reads_as_not_a_class_in_both_modes():
    member_probs = probs(
        [[0.1, 0.0, 0.9], [0.7, 0.0, 0.3], [0.0, 0.2, 0.8]],
        [[0.0, 0.2, 0.8], [0.2, 0.0, 0.8], [0.0, 0.9, 0.1]],
    )  # means: output 2 0.85; output 2 0.55 (class 0 0.45); class 1 0.55 (output 2 0.45)
    assert panel_decisions(member_probs, 0.6, not_a_class=2).tolist() == [NOT_A_CLASS, UNDECIDED, UNDECIDED]
    assert panel_decisions(member_probs, 0.5, not_a_class=2).tolist() == [NOT_A_CLASS, NOT_A_CLASS, 1]
    assert panel_decisions(member_probs, None, not_a_class=2).tolist() == [NOT_A_CLASS, UNDECIDED, UNDECIDED]
    # without it the last output is a class like any other
    assert panel_decisions(member_probs, 0.5).tolist() == [2, 2, 1]
    assert panel_decisions(member_probs, 0.5, not_a_class=0).tolist() == [2, 2, 1]


def test_an_even_split_at_one_half_is_undecided():
    split = probs([[1.0, 0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0, 1.0]])  # one judge sure of 0, the other sure of 3
    assert panel_decisions(split, threshold=0.5).tolist() == [UNDECIDED]


@pytest.mark.parametrize("threshold", [0.0, 0.49, 1.01, -1.0])
def test_a_threshold_outside_one_half_to_one_is_refused(threshold):
    with pytest.raises(ValueError, match="threshold"):
        panel_decisions(probs([[0.5, 0.5]]), threshold=threshold)
    with pytest.raises(ValueError, match="threshold"):
        EnsembleClassifierSUT([ClassifierSUT(nn.Flatten())], threshold=threshold)
    with pytest.raises(ValueError, match=r"\(M, N, K\)"):
        panel_decisions(torch.rand(3, 4), threshold=0.5)


class Sure(nn.Module):
    """Logits that read ``answers[i]`` in the i-th image (its index in pixel 0), over ``classes`` outputs."""

    def __init__(self, answers: list[int], classes: int = 11, confidence: float = 8.0) -> None:
        super().__init__()
        self.answers, self.classes, self.confidence = torch.tensor(answers), classes, confidence

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        read = self.answers[images[:, 0, 0, 0].round().long()]
        return nn.functional.one_hot(read, self.classes).float() * self.confidence


def indexed(n: int) -> torch.Tensor:
    images = torch.zeros(n, 1, 4, 4)
    images[:, 0, 0, 0] = torch.arange(n).float()
    return images


def test_an_ensemble_panel_reads_members_and_decides_together():
    members = [Sure([3, 10, 3, 1]), Sure([3, 10, 5, 2]), Sure([3, 4, 5, 7])]
    panel = EnsembleClassifierSUT([ClassifierSUT(m) for m in members], ["a", "b", "c"], threshold=0.5, not_a_class=10)
    assert panel.reads_no_class and panel.threshold == 0.5 and panel.not_a_class == 10
    images = indexed(4)
    member_probs = panel.member_probabilities(images, batch_size=3)  # two chunks: the same as one
    assert member_probs.shape == (3, 4, 11)
    torch.testing.assert_close(member_probs.sum(-1), torch.ones(3, 4))
    torch.testing.assert_close(member_probs, panel.member_probabilities(images))
    decision, readings = panel.panel_readings(images)
    assert decision.tolist() == [3, NOT_A_CLASS, 5, UNDECIDED]
    assert {name: r.tolist() for name, r in readings.items()} == {
        "a": [3, NOT_A_CLASS, 3, 1], "b": [3, NOT_A_CLASS, 5, 2], "c": [3, 4, 5, 7]}
    # a case's result, one image: the panel's decision (one entry) and each member's reading by name
    assert panel.judge_labels(panel(images[1:2]), images[1:2], None) == ([NOT_A_CLASS],
                                                                         {"a": NOT_A_CLASS, "b": NOT_A_CLASS, "c": 4})
    assert panel.judge_labels(panel(images[3:4]), images[3:4], None) == ([UNDECIDED], {"a": 1, "b": 2, "c": 7})
    label, probability = panel.judge_reading(panel(images[1:2]), None)  # the most probable reading, by name
    assert label == NOT_A_CLASS and 0.5 < probability < 1
    # unanimity with no "not a digit" output: output 10 is a class, a split undecided
    plain = EnsembleClassifierSUT([ClassifierSUT(m) for m in members], ["a", "b", "c"])
    assert not plain.reads_no_class and plain.threshold is None
    assert plain.panel_readings(images)[0].tolist() == [3, UNDECIDED, UNDECIDED, UNDECIDED]
    assert plain.judge_labels(plain(images[:1]), images[:1], None) == ([3], {"a": 3, "b": 3, "c": 3})
    assert not ClassifierSUT(Sure([0])).reads_no_class, "a single model has no 'not a digit' answer"


# ---------------------------------------------------------------------------------- the changes people read through
AUGMENTATIONS = {
    "random_blur": lambda x, g: random_blur(x, 1.0, 1.0, g),
    "random_dimming": lambda x, g: random_dimming(x, 1.0, 0.35, g),
    "random_erasure": lambda x, g: random_erasure(x, 1.0, 0.45, generator=g),
    "random_occlusion": lambda x, g: random_occlusion(x, 1.0, g),
    "random_lighting": lambda x, g: random_lighting(x, 1.0, 0.65, g),
    "erase_cells": lambda x, g: erase_cells(x, torch.full((len(x),), 0.5), g),
}


@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_each_change_keeps_shape_and_range_and_follows_the_generator(name):
    change, images = AUGMENTATIONS[name], strokes()
    out = change(images, seeded(1))
    assert out.shape == images.shape and out.dtype == images.dtype
    assert out.min() >= 0 and out.max() <= 1 and not torch.equal(out, images)
    assert torch.equal(out, change(images, seeded(1))), "the same generator, the same change"
    assert not torch.equal(out, change(images, seeded(2)))
    assert torch.equal(images, strokes()), "the input is left as it was"
    rgb = images.expand(-1, 3, -1, -1).contiguous()
    assert change(rgb, seeded(1)).shape == rgb.shape


@pytest.mark.parametrize("change", [
    lambda x: random_blur(x, 0.0, 1.0), lambda x: random_blur(x, 1.0, 0.0), lambda x: random_dimming(x, 0.0, 0.3),
    lambda x: random_erasure(x, 0.0, 0.5), lambda x: random_occlusion(x, 0.0), lambda x: random_lighting(x, 0.0, 0.6),
])
def test_a_change_of_probability_zero_returns_the_images(change):
    images = strokes(4)
    assert change(images) is images


def test_gaussian_blur_spreads_ink_and_keeps_flat_images():
    dot = torch.zeros(1, 1, 17, 17)
    dot[0, 0, 8, 8] = 1.0
    blurred = gaussian_blur(dot, 1.0)
    assert blurred.shape == dot.shape and blurred.sum().item() == pytest.approx(1.0, abs=1e-5)
    assert blurred[0, 0, 8, 8] == blurred.max() < 0.5 and blurred[0, 0, 8, 9] > 0
    torch.testing.assert_close(blurred, blurred.flip(-1))  # symmetric
    torch.testing.assert_close(blurred, blurred.transpose(-1, -2))
    flat = torch.full((2, 3, 8, 8), 0.4)
    torch.testing.assert_close(gaussian_blur(flat, 2.0), flat)  # the edge repeats: no dark border
    assert gaussian_blur(dot, 0.0) is dot
    assert (gaussian_blur(dot, 2.0)[0, 0, 8, 8] < blurred[0, 0, 8, 8]), "a wider blur, a fainter centre"


def test_dimming_scales_each_image_by_one_factor_in_its_range():
    images = strokes()
    out = random_dimming(images, 1.0, 0.35, seeded(3))
    ink = images > 0
    for image, dimmed, where in zip(images, out, ink):
        ratio = dimmed[where] / image[where]
        assert 0.35 - 1e-6 <= ratio.min() and ratio.max() <= 1 + 1e-6
        torch.testing.assert_close(ratio, torch.full_like(ratio, ratio[0].item()))
    assert torch.equal(out[~ink], images[~ink]), "the background stays black"


@pytest.mark.parametrize("erase", [
    lambda x, g: random_erasure(x, 1.0, 0.2, 0.5, generator=g),
    lambda x, g: erase_cells(x, torch.full((len(x),), 0.3), g),
])
def test_erasure_only_removes_ink(erase):
    images = strokes()
    out = erase(images, seeded(4))
    kept = out == images
    assert (kept | (out == 0)).all(), "each pixel kept as it was or blacked out"
    assert (out <= images).all() and (out[images == 0] == 0).all(), "no ink added"
    removed = ((images > 0) & (out == 0)).flatten(1).sum(1)
    assert (removed > 0).all(), "every image loses some of its stroke"
    share = (out > 0).sum() / (images > 0).sum()
    assert 0.1 < share < 0.6, "keeping 20-50 % of the cells keeps about that share of the ink"


def test_erase_cells_keeps_about_its_share():
    images = torch.ones(200, 1, 32, 32)
    keep = torch.linspace(0.0, 1.0, 200)
    out = erase_cells(images, keep, seeded(5))
    share = out.flatten(1).mean(1)
    assert share[0] == 0 and share[-1] == 1
    assert (share - keep).abs().mean() < 0.1


def test_occlusion_changes_one_rectangle():
    # a bright patch (dots or noise) over a black image: inside one rectangle of sides 4-10 px (32 px)
    black = torch.zeros(24, 1, 32, 32)
    bright = random_occlusion(black, 1.0, seeded(6))
    assert (bright.flatten(1).amax(1) > 0).sum() >= 20, "every image chosen at prob. 1 (a dark patch may hide one)"
    for image in bright[:, 0]:
        rows, cols = (image > 0).any(1).nonzero(), (image > 0).any(0).nonzero()
        if len(rows):
            assert rows.max() - rows.min() + 1 <= 10 and cols.max() - cols.min() + 1 <= 10
    # a dark patch over a white image (prob / 2 of the images): exactly one filled rectangle of sides 3-7 px
    white = torch.ones(24, 1, 32, 32)
    dark = random_occlusion(white, 1.0, seeded(7))
    hit = [mask for mask in dark[:, 0] < 1 if mask.any()]
    assert 0 < len(hit) < 24
    for mask in hit:
        rows, cols = mask.any(1).nonzero()[:, 0], mask.any(0).nonzero()[:, 0]
        box = mask[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
        assert box.all() and int(mask.sum()) == box.numel(), "one filled rectangle"
        assert 3 <= len(rows) <= 7 and 3 <= len(cols) <= 7
    assert (dark[dark < 1] == 0).all(), "blacked out"


def test_rectangles_are_one_filled_box_each_within_their_sides():
    masks = rectangles(50, 32, 32, 4, 10, seeded(8))
    assert masks.shape == (50, 1, 32, 32) and set(masks.unique().tolist()) <= {0.0, 1.0}
    for mask in masks[:, 0].bool():
        rows, cols = mask.any(1).nonzero()[:, 0], mask.any(0).nonzero()[:, 0]
        assert 4 <= len(rows) <= 10 and 4 <= len(cols) <= 10
        assert int(mask.sum()) == len(rows) * len(cols)


def test_lighting_raises_the_background_and_never_darkens():
    images = strokes()
    out = random_lighting(images, 1.0, 0.65, seeded(9))
    assert (out >= images - 1e-6).all(), "lighting only lightens"
    background = (images == 0).flatten(1)
    for lit, black in zip(out.flatten(1), background):
        raised = lit[black][lit[black] > 0]
        assert len(raised), "every image chosen at probability 1"
        # the background inside the lit region is one grey level in [0.1, max_level]
        assert 0.1 - 1e-6 <= raised.min() == raised.max() <= 0.65 + 1e-6
    assert (out.flatten(1).amax(1) >= images.flatten(1).amax(1) - 1e-6).all(), "the stroke stays brightest"


def test_a_judges_augmentation_adds_the_people_changes_and_follows_the_generator():
    images = strokes()
    judge, plain = JudgeConfig(), OracleConfig()
    assert isinstance(judge, PeopleChanges) and not isinstance(plain, PeopleChanges)
    out = augment(images, judge, seeded(10))
    assert out.shape == images.shape and out.min() >= 0 and out.max() <= 1
    assert torch.equal(out, augment(images, judge, seeded(10)))
    assert not torch.equal(out, augment(images, plain, seeded(10))), "the judge reads through more"
    # the judge's config keeps the oracle's fields and adds the people changes
    assert judge.max_steps == plain.max_steps and judge.not_digit_share == 0.16
    assert isinstance(ConvMixerJudgeConfig(), ConvMixerOracleConfig) and VoteConfig().threshold is None


# ------------------------------------------------------------------------------------ images that show no digit
def test_not_digits_keep_shape_and_range_and_draw_every_kind():
    images = strokes(240, seed=11)
    made = not_digits(images, seeded(12))
    assert made.shape == images.shape and made.min() >= 0 and made.max() <= 1
    assert torch.equal(made, not_digits(images, seeded(12))), "the same generator, the same images"
    assert not torch.equal(made, not_digits(images, seeded(13)))
    # the kind of each image is the generator's first draw (one per image): every kind is there
    kinds = torch.randint(0, len(NOT_DIGIT_KINDS), (len(images),), generator=seeded(12))
    assert set(kinds.tolist()) == set(range(len(NOT_DIGIT_KINDS))) == set(range(6))
    fragments = []
    for image, out, kind in zip(images, made, kinds.tolist()):
        name = NOT_DIGIT_KINDS[kind]
        if name == "fragments":  # a few cells of the stroke (at most 15 % kept), maybe dimmed
            assert (out[image == 0] == 0).all() and (out <= image + 1e-6).all()
            fragments.append(float((out > 0).sum() / (image > 0).sum()))
        elif name == "blank":  # the image at most 0.06 of itself
            assert (out <= 0.06 * image + 1e-6).all()
        elif name == "tiles":  # the same pixels in shuffled 8 x 8 tiles
            assert torch.equal(out.flatten().sort().values, image.flatten().sort().values)
        elif name == "grey":  # a grey level and noise everywhere, no black background
            assert (out > 0).all()
        elif name == "scribble":  # strokes of their own, not the image's
            assert 0.02 < (out > 0).float().mean() < 0.7 and out.max() > 0.5
        assert not torch.equal(out, image), name
    assert sum(fragments) / len(fragments) < 0.25


def test_scribbles_are_strokes_of_about_two_pixels():
    drawn = scribbles(8, 32, generator=seeded(14))
    assert drawn.shape == (8, 1, 32, 32) and drawn.min() >= 0 and drawn.max() <= 1
    assert torch.equal(drawn, scribbles(8, 32, generator=seeded(14)))
    share = (drawn > 0.5).flatten(1).float().mean(1)
    assert (share > 0.03).all() and (share < 0.5).all()
    assert scribbles(2, 32, strokes=0, generator=seeded(0)).sum() == 0


def test_with_not_digits_adds_a_share_of_the_batch_labelled_past_the_digits():
    images, labels = strokes(20), torch.arange(20) % 10
    more, more_labels = with_not_digits(images, labels, 0.25, 10, seeded(15))
    assert more.shape == (25, 1, 32, 32) and torch.equal(more[:20], images)
    assert more_labels.tolist() == labels.tolist() + [10] * 5
    same, same_labels = with_not_digits(images, labels, 0.0, 10)
    assert same is images and same_labels is labels


# ------------------------------------------------------------------------------------------- a judge's training
def test_a_judge_network_has_one_output_past_the_classes():
    from hynea_pl.zoo.mnist.data import DataConfig

    for cfg, outputs in ((JudgeConfig(widths=(4, 8)), 11), (OracleConfig(widths=(4, 8)), 10),
                         (ConvMixerJudgeConfig(dim=8, depth=1), 11), (ConvMixerOracleConfig(dim=8, depth=1), 10)):
        network, _, args = oracle_network(cfg, DataConfig())
        assert args["num_classes"] == outputs
        assert network(torch.zeros(2, 1, 32, 32)).shape == (2, outputs)


def test_a_judges_training_step_learns_its_not_a_digit_label(monkeypatch):
    torch.manual_seed(0)
    seen = []
    cross_entropy = nn.functional.cross_entropy

    def spy(logits, labels, **kwargs):
        seen.append((logits.shape, labels.clone()))
        return cross_entropy(logits, labels, **kwargs)

    monkeypatch.setattr(nn.functional, "cross_entropy", spy)
    model = OracleNet(widths=(4, 8), num_classes=11)
    images, labels = strokes(16), torch.arange(16) % 10
    cfg = JudgeConfig(widths=(4, 8), not_digit_share=0.25)
    loss = OracleTraining(model, cfg, not_digit_label=10).training_step((images, labels), 0)
    assert torch.isfinite(loss) and loss.requires_grad
    (shape, trained_on), = seen
    assert shape == (20, 11) and trained_on[:16].tolist() == labels.tolist() and trained_on[16:].tolist() == [10] * 4
    loss.backward()
    assert model.head[-1].weight.grad.shape[0] == 11 and torch.isfinite(model.head[-1].weight.grad).all()
    # a plain oracle member: its own batch, no extra label
    seen.clear()
    OracleTraining(OracleNet(widths=(4, 8)), OracleConfig(widths=(4, 8))).training_step((images, labels), 0)
    assert seen[0][0] == (16, 10) and seen[0][1].tolist() == labels.tolist()
    with pytest.raises(ValueError, match="not a digit"):
        OracleTraining(model, cfg)


# ------------------------------------------------------------------------------------------- the tiny zoo's judges
def test_the_tiny_zoos_judges_load_with_their_not_a_digit_output(tiny_zoo):
    from hynea_pl.zoo.labelled.oracle import ORACLE_ROLES, load_oracle

    for name in ORACLE_ROLES["judges"]:
        judge = load_oracle(tiny_zoo.entries[name])
        assert judge.not_a_class == 10 and judge(torch.rand(2, 1, 32, 32)).shape == (2, 11), name
    assert load_oracle(tiny_zoo.entries["steer-cnn"]).not_a_class is None
    args = tiny_zoo.panel_args(["oracle-1", "judge-convmixer"], "judges")
    assert args["names"] == ["oracle-1", "judge-convmixer"] and len(args["members"]) == 2
    assert (args["threshold"], args["not_a_class"]) == (0.5, 10)
    steering = tiny_zoo.panel_args(["steer-cnn"], "steering")
    assert (steering["threshold"], steering["not_a_class"]) == (None, None)


def test_the_tiny_zoos_judges_are_a_voting_panel_that_can_read_no_digit(tiny_zoo):
    from hynea_pl.zoo.labelled.oracle_sut import ZooOracle

    judges = ZooOracle("tiny", "judges")
    assert judges.reads_no_class and judges.threshold == 0.5 and judges.not_a_class == 10
    assert judges.member_names == ["oracle-1", "oracle-2", "judge-convmixer"]
    assert tiny_zoo.profile.vote == VoteConfig(threshold=0.5)
    images = torch.rand(6, 1, 32, 32, generator=seeded(16))
    decision, readings = judges.panel_readings(images)
    assert decision.shape == (6,) and set(readings) == set(judges.member_names)
    allowed = set(range(10)) | {NOT_A_CLASS, UNDECIDED}
    assert set(decision.tolist()) <= allowed and all(set(r.tolist()) <= allowed - {UNDECIDED}
                                                    for r in readings.values())
    assert torch.equal(panel_decisions(judges.member_probabilities(images), 0.5, 10), decision)
    steering = ZooOracle("tiny", "steering")
    assert not steering.reads_no_class and steering.threshold is None
    # the judges' ceiling is their zoo's gate whatever the realism test (their "not a digit" answer is its part)
    ceiling = {g["name"]: g["value"] for g in tiny_zoo.quality["gates"]}["verdict_ceiling"]
    assert judges.verdict_ceiling(None) == ceiling
    assert steering.verdict_ceiling(None) is None and ZooOracle("tiny", "judges", ["oracle-1"]).verdict_ceiling(
        None) is None


def test_a_vote_or_a_judge_config_out_of_range_is_refused():
    from hynea_pl.zoo.labelled.config import JudgeConfig, VoteConfig

    assert VoteConfig(threshold=None).threshold is None and VoteConfig(threshold=0.5).threshold == 0.5
    with pytest.raises(ValueError, match=r"vote.threshold must be in \[0.5, 1\]"):
        VoteConfig(threshold=0.2)
    with pytest.raises(ValueError, match="not_digit_share must be in"):
        JudgeConfig(not_digit_share=1.5)
    with pytest.raises(ValueError, match="lighting_prob must be in"):
        JudgeConfig(lighting_prob=-0.1)
