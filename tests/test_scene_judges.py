"""The scene validity judges' building blocks: a single-object classifier read over windows
(``DigitWindowReader``) and unanimity of multi-label judges (``UnanimousPresence``)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hynea_pl.suts import ClassifierSUT
from hynea_pl.suts.consensus import UnanimousPresence
from hynea_pl.suts.window_reader import DigitWindowReader, window_batches


class CentreInk(nn.Module):
    """A 2-class "classifier" of 32 px inputs: class 1's logit grows with the ink in the central 8x8 pixels."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        centre = images[..., 12:20, 12:20].mean(dim=(1, 2, 3))
        return torch.stack([torch.zeros_like(centre), 12 * centre - 4], dim=-1)


def scene_with_square(x: int, y: int, side: int = 16) -> torch.Tensor:
    scene = torch.zeros(1, 1, 64, 64)
    scene[..., y:y + side, x:x + side] = 1.0
    return scene


def test_window_batches_cut_the_windows_on_the_stride_grid():
    images = torch.arange(2 * 1 * 10 * 10, dtype=torch.float32).view(2, 1, 10, 10)
    windows = window_batches(images, size=4, stride=3)
    assert windows.shape == (2, 9, 1, 4, 4)  # (10 - 4) / 3 + 1 = 3 positions per side
    assert torch.equal(windows[1, 0], images[1, :, 0:4, 0:4])
    assert torch.equal(windows[0, 5], images[0, :, 3:7, 6:10])  # row 1, column 2


def test_window_reader_pads_resized_windows_to_the_readers_input():
    reader = DigitWindowReader(ClassifierSUT(CentreInk()), sizes=(20, 32), stride=4)
    windows = reader.windows(scene_with_square(10, 30))
    assert windows.shape[-3:] == (1, 32, 32)
    assert windows.shape[1] == 12 ** 2 + 9 ** 2
    assert windows[..., :2, :].abs().max() == 0 and windows[..., -2:].abs().max() == 0  # the 2 px frame


def test_window_reader_finds_an_object_anywhere_and_maps_the_threshold_to_logit_zero():
    reader = DigitWindowReader(ClassifierSUT(CentreInk()), sizes=(20, 24), stride=3, threshold=0.9)
    blank, corner, middle = torch.zeros(1, 1, 64, 64), scene_with_square(44, 2), scene_with_square(24, 24)
    with torch.no_grad():
        presence = reader.presence(torch.cat([blank, corner, middle]))
        logits = reader(torch.cat([blank, corner, middle]))
    assert presence[0, 1] < 0.05  # no ink anywhere
    assert presence[1, 1] > 0.95 and presence[2, 1] > 0.95  # found wherever it is
    assert torch.equal(logits > 0, presence > 0.9)
    expected = math.log(presence[2, 1] / (1 - presence[2, 1])) - math.log(9)
    assert logits[2, 1].item() == pytest.approx(expected, rel=1e-3)


def test_window_reader_refuses_bad_settings():
    with pytest.raises(ValueError, match="threshold"):
        DigitWindowReader(ClassifierSUT(CentreInk()), threshold=1.0)
    with pytest.raises(ValueError, match="does not fit"):
        DigitWindowReader(ClassifierSUT(CentreInk()), sizes=(80,))(torch.zeros(1, 1, 64, 64))


class Fixed(nn.Module):
    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.register_buffer("logits", torch.tensor([logits]))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(images.shape[0], -1)


def test_unanimous_presence_needs_every_judge():
    judge = UnanimousPresence([Fixed([2.0, -1.0, 3.0]), Fixed([0.5, 4.0, -0.1])])
    logits = judge(torch.zeros(2, 1, 8, 8))
    assert logits.shape == (2, 3)
    assert (logits > 0).tolist() == [[True, False, False]] * 2
    with pytest.raises(ValueError, match="differ in shape"):
        UnanimousPresence([Fixed([1.0, 2.0]), Fixed([1.0])])(torch.zeros(1, 1, 8, 8))
    with pytest.raises(ValueError, match="at least one"):
        UnanimousPresence([])
