"""A profile's splits read on demand: :class:`StoredImages` over uint8 levels gives the floats a float tensor would,
and a split's dataset gives the same batches either way; the zoo's training accelerator is set for a block only."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from hynea_pl.zoo import train
from hynea_pl.zoo.splits import ImageSplit, StoredImages


@pytest.fixture
def stored() -> tuple[StoredImages, torch.Tensor, torch.Tensor]:
    """Images over 50 uint8 levels ``(50, 3, 8, 8)``, 30 of them in a shuffled split index, and their floats."""
    generator = torch.Generator().manual_seed(0)
    levels = torch.randint(0, 256, (50, 3, 8, 8), dtype=torch.uint8, generator=generator)
    index = torch.randperm(50, generator=generator)[:30]
    return StoredImages(levels, index), index, levels[index].to(torch.float32) / 255.0


def test_stored_images_index_like_the_float_tensor(stored):
    images, index, floats = stored
    assert len(images) == 30 and images.shape == floats.shape == (30, 3, 8, 8)
    for key in (0, 7, -1, slice(None, 5), slice(3, 20, 4), torch.tensor([4, 0, 29])):
        assert torch.equal(images[key], floats[key]), key
    assert images[3].dtype == torch.float32 and 0.0 <= images[:].min() and images[:].max() <= 1.0
    assert torch.equal(images.float(), floats)


@pytest.mark.parametrize("labels", [True, False])
def test_a_split_gives_the_same_batches_read_on_demand_or_as_floats(stored, labels):
    images, index, floats = stored
    targets = index % 4
    batches = []
    for split in (ImageSplit(images, targets, floats[:2], targets[:2]), ImageSplit(floats, targets, floats[:2],
                                                                                    targets[:2])):
        loader = DataLoader(split.dataset(labels=labels), batch_size=8, shuffle=True, drop_last=True,
                            generator=torch.Generator().manual_seed(3))
        batches.append(list(loader))
    assert len(batches[0]) == len(batches[1]) == 3
    for stored_batch, float_batch in zip(*batches):
        assert len(stored_batch) == len(float_batch) == (2 if labels else 1)
        for a, b in zip(stored_batch, float_batch):
            assert torch.equal(a, b)


def test_the_training_accelerator_holds_for_its_block_only():
    assert train._accelerator == "cpu"
    with train.training_accelerator("auto"):
        assert train._accelerator == "auto"
    assert train._accelerator == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(train.AcceleratorUnavailable, match="not available on this machine"):
            with train.training_accelerator("cuda"):
                pass
    else:
        assert train.check_accelerator("cuda") == "cuda"
    assert train._accelerator == "cpu"
