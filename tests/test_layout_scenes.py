"""The layout scene generator (:class:`~hynea_pl.generators.LayoutSceneGenerator`): the tiny zoo's class-conditional
LDM drawing each digit of a seeded layout. Differentiable end to end, digits confined to their squares, a layout that
replays from its seed and its record, the gates' scoring on crafted detections, origins the judges must read, and
the one-line refusals (SINVAD, batched cases, inversion, decoding without a layout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from hynea_pl.campaign.case_types import CaseSelection
from hynea_pl.campaign.cases import iter_cases, judges_read_layout
from hynea_pl.campaign.replay import check_layout
from hynea_pl.generators import AUTOENCODER, LayoutSceneGenerator, require
from hynea_pl.generators.inversion import check_invertible
from hynea_pl.generators.layout import write_layout_settings
from hynea_pl.scene_layout import SceneConfig, SceneLayout
from hynea_pl.schema import CaseRecord
from hynea_pl.zoo.scenes.layout_scenes import digits_found, layout_scores


@pytest.fixture
def layout_folder(tiny_zoo, tmp_path) -> Path:
    """A layout generator's folder: the tiny zoo's LDM plus ``layout.json`` (what the ``layout_scenes`` extra
    writes)."""
    from hynea_pl.zoo.registry import component_paths

    ldm = component_paths("tiny", "ldm")[0]
    folder = tmp_path / "layout_scenes"
    for sub in ("unet", "vae", "scheduler", "class_embedding"):
        shutil.copytree(ldm / sub, folder / sub)
    write_layout_settings(folder, SceneConfig())
    return folder


@pytest.fixture
def generator(layout_folder) -> LayoutSceneGenerator:
    return LayoutSceneGenerator(str(layout_folder), num_inference_steps=2)


def _three_digit_layout(generator: LayoutSceneGenerator) -> tuple[int, SceneLayout]:
    for seed in range(200):
        layout = generator.case_condition(None, seed)
        if len(layout) == 3:
            return seed, layout
    raise AssertionError("no three-digit layout in 200 seeds")


def test_a_layout_folder_may_name_its_ldm_instead_of_holding_it(generator, tiny_zoo, tmp_path):
    """What the ``layout_scenes`` extra writes: ``layout.json`` alone, naming the zoo's LDM (no second copy)."""
    from hynea_pl.zoo.registry import build_component

    folder = tmp_path / "named"
    folder.mkdir()
    write_layout_settings(folder, SceneConfig(max_digits=2), ldm="zoo://tiny/ldm")
    named = LayoutSceneGenerator(pretrained=str(folder))
    assert named.layout.max_digits == 2 and named.latent_shape[0] == 2 * generator.digit_latent_shape[0]
    for mine, copied in zip(named.unet.parameters(), generator.unet.parameters(), strict=True):
        assert torch.equal(mine, copied)
    entry = build_component("tiny", "layout_scenes", verbose=False).entry  # the tiny zoo's kept entry loads too
    assert LayoutSceneGenerator(pretrained=str(entry)).layout.max_digits == SceneConfig().max_digits


def test_a_gradient_reaches_the_hypernet_and_the_control_through_the_compositing(generator):
    seed, layout = _three_digit_layout(generator)
    assert generator.latent_shape == (3 * generator.digit_latent_shape[0], *generator.digit_latent_shape[1:])
    hypernet = generator.make_hypernet()
    for p in hypernet.parameters():  # non-zero zero-initialised layers, so the control gets a gradient
        if not p.any():
            torch.nn.init.normal_(p, std=0.02)
    control = torch.zeros(1, *generator.latent_shape, requires_grad=True)
    image = generator(generator.initial_noise(seed), layout, hypernet=hypernet, control=control)
    assert image.shape == (1, 1, 64, 64) and 0 <= float(image.min()) and float(image.max()) <= 1
    image.sum().backward()
    grads = [p.grad for p in hypernet.parameters() if p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    c = generator.digit_latent_shape[0]
    for k in range(3):  # every digit's slice of the control steers it
        assert float(control.grad[0, k * c:(k + 1) * c].abs().sum()) > 0


def test_each_digit_stays_in_its_square_and_only_its_own_noise_moves_it(generator):
    seed, layout = _three_digit_layout(generator)
    noise = generator.initial_noise(seed)
    image = generator.sample(noise, layout)[0, 0]
    inside = torch.zeros(64, 64, dtype=torch.bool)
    for x, y, side in layout.squares:
        inside[y:y + side, x:x + side] = True
    assert float(image[~inside].abs().max()) == 0.0
    c = generator.digit_latent_shape[0]
    moved = noise.clone()
    moved[:, 2 * c:3 * c] = torch.randn(1, c, *generator.digit_latent_shape[1:])
    changed = (generator.sample(moved, layout)[0, 0] - image).abs() > 1e-6
    x, y, side = layout.squares[2]
    assert changed.any() and not changed[~inside].any()
    others = torch.zeros(64, 64, dtype=torch.bool)
    for x0, y0, s0 in layout.squares[:2]:
        others[y0:y0 + s0, x0:x0 + s0] = True
    third = torch.zeros(64, 64, dtype=torch.bool)
    third[y:y + side, x:x + side] = True
    assert not changed[others & ~third].any()
    images, (boxes,) = generator.render(noise, layout)
    assert torch.equal(images[0, 0], image)  # one sampling gives the scene and its boxes
    assert boxes.shape == (3, 4)
    for (x0, y0, x1, y1), (x, y, side) in zip(boxes.tolist(), layout.squares, strict=True):
        assert x <= x0 < x1 <= x + side and y <= y0 < y1 <= y + side


def test_a_layout_replays_from_its_seed_and_its_record(generator):
    seed, layout = _three_digit_layout(generator)
    assert generator.case_condition(3, seed) == layout  # the class does not move the layout
    noise = generator.initial_noise(seed)
    first = generator.sample(noise, layout)
    again = generator.sample(generator.initial_noise(seed), SceneLayout.from_dict(layout.as_dict()))
    assert torch.equal(first, again)
    described = generator.describe_condition(layout, noise)
    assert described["classes"] == list(layout.classes) and len(described["boxes"]) == 3
    record = CaseRecord(method="hynea", run="r", task="binary", case_id="c1-0", seed=seed, origin_class=1,
                        layout=described)
    check_layout(record, layout)
    with pytest.raises(ValueError, match="recorded layout"):
        check_layout(record, generator.case_condition(None, seed + 1))
    # two rows, two layouts: each row is drawn from its own
    other = generator.case_condition(None, seed + 1)
    both = generator.sample(torch.cat([noise, generator.initial_noise(seed + 1)]), [layout, other])
    assert torch.allclose(both[:1], first, atol=1e-5)


def test_the_scene_generator_refuses_what_it_cannot_do(generator, tmp_path):
    with pytest.raises(FileNotFoundError, match="no layout.json"):
        LayoutSceneGenerator(str(tmp_path))
    with pytest.raises(TypeError, match="SINVAD needs an autoencoder"):
        require(generator, AUTOENCODER, "SINVAD")
    with pytest.raises(TypeError, match="conditions its cases on more"):
        check_invertible(generator)
    latents = torch.zeros(1, *generator.latent_shape)
    with pytest.raises(TypeError, match="needs the scenes' layouts"):
        generator.decode(latents)
    with pytest.raises(TypeError, match="conditions on a SceneLayout"):
        generator.sample(torch.zeros(1, *generator.latent_shape), 3)
    from hynea_pl.campaign.validation import check_batching
    from hynea_pl.methods import HyNeACase

    with pytest.raises(ValueError, match="its own layout"):
        check_batching(CaseSelection(batch_size=2), HyNeACase, "hynea", generator=generator)


class _ReadsAllBut(torch.nn.Module):
    """A multi-label judge that reads every digit except ``blind``."""

    task = "binary"

    def __init__(self, blind: int) -> None:
        super().__init__()
        self.blind = blind

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = torch.full((images.shape[0], 10), 5.0)
        logits[:, self.blind] = -5.0
        return logits

    def judge_reading(self, output: torch.Tensor, target: int) -> tuple[int, float]:
        return int(float(output[0, target]) > 0), 1.0


class _AnySUT(torch.nn.Module):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return torch.zeros(images.shape[0], 2)

    def is_valid_origin(self, output: torch.Tensor, condition: int | None) -> torch.Tensor:
        return torch.ones(output.shape[0], dtype=torch.bool)


def test_origins_are_only_layouts_whose_every_digit_the_judges_read(generator):
    selection = CaseSelection(classes=[1], n_per_class=4, max_seed_tries=30)
    judge = _ReadsAllBut(blind=0)
    cases = list(iter_cases(selection, generator, _AnySUT(), oracle=judge))
    assert all(case.seed is not None for case in cases)
    for case in cases:
        assert 0 not in case.condition.classes
        assert case.condition == generator.case_condition(1, case.seed)
        assert judges_read_layout(judge, case.origin, case.condition)
    skipped = sum(case.skipped_seeds for case in cases)
    expected = sum(0 in generator.case_condition(1, seed).classes for seed in range(1 * 100_000, cases[-1].seed + 1))
    assert skipped == expected > 0  # every layout with a 0 was passed over, and counted
    # without the judges, the same selection keeps the first layouts whatever they hold
    plain = list(iter_cases(selection, generator, _AnySUT()))
    assert [case.seed for case in plain] == [100_000, 100_001, 100_002, 100_003]


def test_gate_scores_on_crafted_detections():
    layouts = [SceneLayout(64, (3, 7), ((0, 0, 20), (30, 30, 20))), SceneLayout(64, (1,), ((10, 10, 20),))]
    boxes = [torch.tensor([[4.0, 4.0, 16.0, 16.0], [34.0, 34.0, 46.0, 46.0]]), torch.tensor([[14.0, 12.0, 20.0, 28.0]])]
    detections = [
        [[4, 4, 16, 16, 3, 0.9], [35, 35, 46, 46, 7, 0.8], [0, 0, 64, 64, 5, 0.99]],  # both found (IoU 1, 0.84)
        [[14, 12, 20, 28, 7, 0.9], [14, 12, 20, 28, 1, 0.1]],  # a 7 where the 1 is; the 1 only at confidence 0.1
    ]
    logits = torch.full((2, 10), -3.0)
    logits[0, [3, 7]] = 2.0  # exactly the layout's set
    logits[1, [1, 4]] = 2.0  # one digit too many
    scores = layout_scores([layout.classes for layout in layouts], boxes, detections, logits)
    assert scores == {"every_digit_detected": 0.5, "attribute_set_exact": 0.5, "digit_detected": pytest.approx(2 / 3)}
    assert digits_found(boxes[0], (3, 7), [[20, 20, 32, 32, 3, 0.9]]) == [False, False]  # right class, wrong place
    with pytest.raises(ValueError, match="one entry per scene"):
        layout_scores([layout.classes for layout in layouts], boxes[:1], detections, logits)


def test_galleries_draw_a_scene_cases_placed_digits():
    from PIL import Image

    from hynea_pl.report.grid import draw_boxes, layout_boxes

    layout = {"size": 64, "classes": [3, 7], "squares": [[0, 0, 20], [30, 30, 20]],
              "boxes": [[4, 4, 16, 16], [34, 34, 46, 46]]}
    record = CaseRecord(method="hynea", run="r", task="binary", case_id="c1-0", seed=0, origin_class=1, target=3,
                        layout=layout)
    assert layout_boxes(record) == [[4, 4, 16, 16, 3], [34, 34, 46, 46, 7]]
    assert layout_boxes(CaseRecord(method="hynea", run="r", task="binary", case_id="c1-0", seed=0,
                                   origin_class=1)) is None
    tile = draw_boxes(Image.new("RGB", (128, 128)), layout_boxes(record), 2.0, target=3)
    pixels = tile.load()
    assert pixels[8, 20] == (230, 30, 30)  # the tested digit's box edge in red (x0 = 4 px at scale 2)
    assert pixels[68, 80] == (40, 160, 255)  # the other digit's in blue


def test_a_scene_is_realistic_when_each_placed_digit_is():
    from hynea_pl.evaluation.judge import realism_readings
    from hynea_pl.scene_layout import digit_windows

    layout = SceneLayout(64, (3, 7), ((0, 0, 28), (30, 30, 20)))
    scenes = torch.zeros(2, 1, 64, 64)
    scenes[0, :, 5:20, 10:15] = 1.0  # ink in the first square of the first scene only
    windows = digit_windows(scenes, layout)
    assert windows.shape == (4, 1, 32, 32)  # image-major: scene 0's two digits, then scene 1's
    assert torch.equal(windows[0, :, 7:22, 12:17], torch.ones(1, 15, 5))  # a 28 px square: unchanged, padded by 2
    assert float(windows[1:].abs().max()) == 0.0

    class InkIsAtypical:
        """A realism test that fails a window with ink and scores it by its ink."""

        def readings(self, images):
            ink = images.flatten(1).amax(dim=1)
            return {"passed": ink < 0.5, "score": ink}

    readings = realism_readings(InkIsAtypical(), scenes, layout.as_dict())
    assert readings["passed"].tolist() == [False, True]  # one atypical digit fails its whole scene
    assert readings["score"].tolist() == [1.0, 0.0]  # the least typical digit's score
    whole = realism_readings(InkIsAtypical(), scenes)  # no layout: the whole image, as for single digits
    assert whole["passed"].tolist() == [False, True]
