"""Digit scenes: the boxes are where the digits were drawn, the draw is deterministic, the split is disjoint."""

import pytest
import torch

from hynea_pl.scene_layout import SceneConfig, digit_crops, ink_box, overlap_fraction
from hynea_pl.zoo.scenes.data import make_scenes


def _digits(n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic 32x32 'digits': a filled rectangle of random size per digit, label = index % 10."""
    g = torch.Generator().manual_seed(0)
    images = torch.zeros(n, 1, 32, 32)
    for i in range(n):
        h, w = (int(v) for v in torch.randint(6, 20, (2,), generator=g))
        images[i, 0, 16 - h // 2:16 - h // 2 + h, 16 - w // 2:16 - w // 2 + w] = 1.0
    return images, torch.arange(n) % 10


def test_boxes_cover_exactly_the_ink_and_nothing_outside():
    images, labels = _digits()
    cfg = SceneConfig()
    scenes = make_scenes(images, labels, 40, seed=3, cfg=cfg)
    assert scenes.images.shape == (40, 1, 64, 64)
    for image, boxes in zip(scenes.images, scenes.boxes):
        assert 1 <= len(boxes) <= 3
        ink = image[0] > cfg.ink_threshold
        inside = torch.zeros_like(ink)
        for x0, y0, x1, y1 in boxes.long().tolist():
            assert 0 <= x0 < x1 <= 64 and 0 <= y0 < y1 <= 64
            inside[y0:y1, x0:x1] = True
            # each box is tight: its border rows and columns hold ink
            assert ink[y0:y1, x0].any() or ink[y0:y1, x1 - 1].any()
            assert ink[y0, x0:x1].any() and ink[y1 - 1, x0:x1].any()
        assert not (ink & ~inside).any(), "ink outside every box"


def test_labels_are_the_placed_digits_classes_and_attributes_match():
    images, labels = _digits(10)  # label i = digit i, each a distinct rectangle
    scenes = make_scenes(images, labels, 30, seed=1)
    attrs = scenes.attributes()
    for i, cls in enumerate(scenes.labels):
        assert set(torch.nonzero(attrs[i]).view(-1).tolist()) == set(cls.tolist())
    assert scenes.counts().min() >= 1 and scenes.counts().max() <= 3
    assert len({int(c) for c in scenes.counts()}) > 1, "1-3 digits per scene should vary"


def test_same_seed_same_scenes_other_seed_other_scenes():
    images, labels = _digits()
    a = make_scenes(images, labels, 8, seed=5)
    b = make_scenes(images, labels, 8, seed=5)
    c = make_scenes(images, labels, 8, seed=6)
    assert torch.equal(a.images, b.images)
    assert all(torch.equal(x, y) for x, y in zip(a.boxes, b.boxes))
    assert not torch.equal(a.images, c.images)


def test_overlap_limit_holds():
    images, labels = _digits()
    cfg = SceneConfig(max_overlap=0.1)
    scenes = make_scenes(images, labels, 50, seed=2, cfg=cfg)
    for boxes in scenes.boxes:
        b = [tuple(v) for v in boxes.long().tolist()]
        for i in range(len(b)):
            for j in range(i + 1, len(b)):
                assert overlap_fraction(b[i], b[j]) <= cfg.max_overlap


def test_helpers():
    patch = torch.zeros(10, 10)
    patch[2:5, 3:8] = 1
    assert ink_box(patch, 0.5) == (3, 2, 8, 5)
    assert ink_box(torch.zeros(4, 4), 0.5) is None
    assert digit_crops(torch.zeros(2, 1, 32, 32)).shape == (2, 1, 28, 28)
    assert overlap_fraction((0, 0, 4, 4), (2, 2, 6, 6)) == 4 / 16


def test_layouts_follow_the_scene_rules_and_replay_from_their_seed():
    from hynea_pl.scene_layout import SceneLayout, nominal_ink_box, sample_layout

    cfg = SceneConfig()
    layouts = [sample_layout(seed, cfg) for seed in range(300)]
    assert sample_layout(7, cfg) == layouts[7] and sample_layout(8, cfg) != layouts[7]
    counts = {len(layout) for layout in layouts}
    assert counts == {1, 2, 3}
    assert {c for layout in layouts for c in layout.classes} == set(range(10))
    for layout in layouts:
        assert layout.size == 64
        boxes = []
        for x, y, side in layout.squares:
            assert 17 <= side <= 28 and x + side <= 64 and y + side <= 64
            m0, m1, m2, m3 = nominal_ink_box(side)
            boxes.append((x + m0, y + m1, x + m2, y + m3))
        for a in range(len(boxes)):  # no two nominal ink boxes overlap by more than max_overlap
            for b in range(a):
                assert overlap_fraction(boxes[a], boxes[b]) <= cfg.max_overlap
    assert SceneLayout.from_dict(layouts[3].as_dict()) == layouts[3]
    with pytest.raises(ValueError, match="does not fit"):
        SceneLayout(64, (1,), ((50, 50, 20),))
