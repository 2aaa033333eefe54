"""The changes that keep what an image shows (hynea_pl.transforms), the views HyNeA's search draws from them
(SearchViews), and how a case counts, scores and stops on its views."""

from __future__ import annotations

import pytest
import torch
from test_hynea_case import make_case, make_trainer

from hynea_pl.callbacks import SUTEvaluationBudget
from hynea_pl.images import shift_image
from hynea_pl.methods import HyNeACase
from hynea_pl.methods.views import SearchViews
from hynea_pl.transforms import Change, change, changes_of


def dot(h: int = 16, w: int = 16, y: int = 5, x: int = 9) -> torch.Tensor:
    image = torch.zeros(1, 1, h, w)
    image[0, 0, y, x] = 1.0
    return image


# --------------------------------------------------------------------------------------------- the changes
def test_the_identity_change_keeps_the_image():
    image = torch.rand(2, 3, 12, 12)
    assert torch.equal(change(image, Change()), image)


def test_a_shift_is_whole_pixels_with_the_edge_repeated():
    image = torch.rand(1, 1, 8, 8)
    assert torch.equal(change(image, Change(dy=1, dx=-2)), shift_image(image, 1, -2, mode="replicate"))


def test_a_rotation_turns_the_image_clockwise_about_its_centre():
    turned = change(dot(), Change(angle=90.0))
    y, x = divmod(int(turned.flatten().argmax()), 16)
    # centre (7.5, 7.5): a dot 2.5 above and 1.5 right of it moves to 1.5 below and 2.5 right of it
    assert (y, x) == (9, 10)


def test_brightness_contrast_and_blur_do_what_they_say():
    image = torch.full((1, 1, 8, 8), 0.5)
    image[..., 2:6, 2:6] = 0.9
    assert float(change(image, Change(brightness=0.5)).max()) == pytest.approx(0.45)
    low = change(image, Change(contrast=0.5))
    assert float(low.max() - low.min()) == pytest.approx(0.2, abs=1e-5)  # half the contrast of 0.4
    blurred = change(dot(), Change(blur=0.8))
    assert float(blurred.max()) < 0.5 and float(blurred.sum()) == pytest.approx(1.0, abs=1e-4)
    assert int(blurred.flatten().argmax()) == int(dot().flatten().argmax())


def test_changes_are_differentiable_and_stacked_change_major():
    image = torch.rand(2, 1, 12, 12, requires_grad=True)
    how = [Change(dy=1, angle=4.0, scale=1.05, brightness=1.1, contrast=0.9, blur=0.5), Change(dx=-1)]
    out = changes_of(image, how)
    assert out.shape == (4, 1, 12, 12) and float(out.min()) >= 0 and float(out.max()) <= 1
    torch.testing.assert_close(out[2:], change(image, how[1]))
    out.sum().backward()
    assert image.grad is not None and float(image.grad.abs().sum()) > 0
    assert changes_of(image, []).shape == (0, 1, 12, 12)


# --------------------------------------------------------------------------------------------- the views
def test_views_are_drawn_within_their_ranges_and_the_same_for_the_same_seed():
    views = SearchViews(count=200, shift=1, rotation=5.0, scale=0.05, brightness=0.15, contrast=0.2, blur=0.5)
    drawn = views.draw(torch.Generator().manual_seed(3))
    assert drawn == views.draw(torch.Generator().manual_seed(3))
    assert drawn != views.draw(torch.Generator().manual_seed(4))
    assert len(drawn) == 200
    assert {(c.dy, c.dx) for c in drawn} == {(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)}
    assert all(abs(c.angle) <= 5 and 0.95 <= c.scale <= 1.05 and 0.85 <= c.brightness <= 1.15 for c in drawn)
    assert all(0.8 <= c.contrast <= 1 and 0 <= c.blur <= 0.5 for c in drawn)
    image = torch.rand(1, 1, 12, 12)
    assert views(image, torch.Generator().manual_seed(3)).shape == (200, 1, 12, 12)


def test_the_default_draws_no_view_and_no_blur():
    assert SearchViews().count == 0 and SearchViews().blur == 0
    assert SearchViews().enough_failed(torch.zeros(0, dtype=torch.bool))


@pytest.mark.parametrize(("fraction", "failed", "enough"), [
    (1.0, [True, True, True, True], True), (1.0, [True, True, True, False], False),
    (0.75, [True, True, True, False], True), (0.75, [True, True, False, False], False)])
def test_a_step_needs_the_configured_fraction_of_views_failed(fraction, failed, enough):
    assert SearchViews(count=4, fail_fraction=fraction).enough_failed(torch.tensor(failed)) is enough


@pytest.mark.parametrize("bad", [{"count": -1}, {"fail_fraction": 0.0}, {"fail_fraction": 1.5}, {"shift": -1},
                                 {"rotation": -2.0}, {"brightness": 1.0}])
def test_bad_views_are_one_line_errors(bad):
    with pytest.raises(ValueError, match=r"views\."):
        SearchViews(**bad)


# --------------------------------------------------------------------------------------------- a case with views
def test_every_view_is_one_sut_evaluation_and_the_budget_counts_them():
    case = make_case(views=SearchViews(count=4))
    assert case.evals_per_step == 5
    make_trainer(3).fit(case)
    assert case.sut_evals == 15
    case = make_case(views=SearchViews(count=4))
    make_trainer(10, [SUTEvaluationBudget(12)]).fit(case)
    assert case.sut_evals == 10 and case.stop_reason == "budget"  # a third step would overrun 12


def test_a_case_draws_its_views_from_its_seed_run_and_step():
    case = make_case(views=SearchViews(count=3))
    case.setup("fit")
    image = case.origin_image
    first = case.sut_inputs(image, 1)
    assert first.shape == (4, *image.shape[1:]) and torch.equal(first[:1], image)
    assert torch.equal(first, case.sut_inputs(image, 1))
    assert not torch.equal(first, case.sut_inputs(image, 2))
    torch.testing.assert_close(first[1:] * 255, (first[1:] * 255).round(), atol=1e-3, rtol=0)  # read as saved
    assert make_case(views=None).sut_inputs(image, 1) is image


def test_a_step_is_found_only_when_the_sut_also_fails_on_the_views():
    case = make_case(views=SearchViews(count=3))
    case.setup("fit")
    target, origin = int(case.target), int(case.origin_output.argmax())
    flipped = torch.zeros(1, 10)
    flipped[0, target] = 10.0
    kept = torch.zeros(1, 10)
    kept[0, origin] = 10.0
    latents = torch.zeros(1, *case.generator.latent_shape)
    image = case.origin_image
    _, found, logged = case.case_step(1, latents, image, torch.cat([flipped, flipped, flipped, kept]), None)
    assert not found and float(logged["views_failed"]) == pytest.approx(2 / 3)
    assert case.sut_evals == 4
    _, found, _ = case.case_step(2, latents, image, torch.cat([flipped] * 4), None)
    assert found and case.result.found and case.result.step == 2
    assert case.result.output.shape == (1, 10)  # the record keeps the image's own output
    # the behaviour term covers the image and its views: cross entropy to the target, averaged over the four
    case = make_case(views=SearchViews(count=3))
    case.setup("fit")
    output = torch.cat([flipped, kept, kept, kept])
    _, _, logged = case.case_step(1, latents, image, output, None)
    expected = torch.nn.functional.cross_entropy(output, case.target.expand(4))
    assert float(logged["behaviour"]) == pytest.approx(float(expected), rel=1e-5)

