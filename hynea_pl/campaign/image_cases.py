"""Test cases that start from real images (``cases.images``): each origin is the generator's reconstruction of a
real image, from the noise its inversion found (:class:`~hynea_pl.generators.inversion.DDIMInversion`).

The images of each selected class are taken in the source's order. An image is a valid origin (paper 4.5, as for
seeded origins) when the SUT reads both the real image and its reconstruction as the image's class; otherwise the
next image of the class is tried, at most ``cases.max_seed_tries`` of them per case (the record's ``skipped_seeds``
counts the images passed over). Every method then starts from the same noise and reconstruction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from hynea_pl.campaign.test_images import read_test_images
from hynea_pl.data import LabelledImages
from hynea_pl.generators.inversion import DDIMInversion, check_invertible
from hynea_pl.metrics import ms_ssim

if TYPE_CHECKING:
    from hynea_pl.campaign.case_types import CaseSelection, TestCase
    from hynea_pl.generators import Generator
    from hynea_pl.suts import SUT


@torch.no_grad()
def image_shape(generator: Generator) -> tuple[int, int, int]:
    """``(C, H, W)`` of the generator's images (one decode of a zero latent)."""
    return tuple(generator.decode(torch.zeros((1, *generator.latent_shape), device=generator.device)).shape[1:])


def read_case_images(selection: CaseSelection, generator: Generator) -> LabelledImages:
    """``cases.images`` converted to the generator's image size and channels; refuses a generator that cannot be
    inverted before anything is read, and a plan larger than the images read (:func:`check_plan_served`: the
    config's check counts the files, this one the images that could be read)."""
    from hynea_pl.campaign.validation import check_plan_served, class_count

    check_invertible(generator)
    channels, height, width = image_shape(generator)
    # a case tries at most max_seed_tries images of its class: no more of a label is ever read
    images = read_test_images(selection.images, (height, width), channels, num_classes=class_count(generator),
                              labels_csv=selection.labels_csv,
                              max_per_label=selection.n_per_class * selection.max_seed_tries)
    check_plan_served(selection, Counter(images.labels), skipped=images.skipped.get("unreadable", 0))
    return images


@torch.no_grad()
def iter_image_cases(selection: CaseSelection, generator: Generator, sut: SUT,
                     images: LabelledImages) -> Iterator[TestCase]:
    """Yield the selected cases in order (``n_per_class`` per class of ``cases.classes``), each from the next
    valid real image of its class; a case that finds none is yielded with ``seed=None``."""
    from hynea_pl.campaign.case_types import CLASS_SEED_STRIDE, TestCase, case_id

    if any(c is None for c in selection.classes):
        raise ValueError("cases.images needs the classes to test (cases.classes), not null")
    inversion = DDIMInversion(**selection.inversion)
    wanted = set(selection.case_ids)
    for origin_class in selection.classes:
        queue = iter([i for i, labels in enumerate(images.labels) if labels == (origin_class,)])
        for index in range(selection.n_per_class):
            cid = case_id(origin_class, index)
            found: TestCase | None = None
            skipped = 0
            for position in queue:
                real = images.images[position:position + 1].to(generator.device)
                if selection.validate_origins and not bool(sut.is_valid_origin(sut(real), origin_class).all()):
                    skipped += 1
                else:
                    inverted = inversion(generator, real, origin_class)
                    origin = inverted.reconstruction
                    if selection.validate_origins and not bool(sut.is_valid_origin(sut(origin), origin_class).all()):
                        skipped += 1
                    else:
                        found = TestCase(
                            cid, origin_class, selection.seed + origin_class * CLASS_SEED_STRIDE + index, skipped,
                            origin=origin.cpu(), noise=inverted.noise.cpu(), real=real.cpu(),
                            source=images.sources[position],
                            inversion={"latent_error": float(inverted.latent_error[0]),
                                       "ms_ssim": float(ms_ssim(origin.cpu(), real.cpu()))})
                if found is not None or skipped >= selection.max_seed_tries:
                    break
            if not wanted or cid in wanted:
                yield found if found is not None else TestCase(cid, origin_class, None, skipped)


__all__ = ["image_shape", "iter_image_cases", "read_case_images"]
