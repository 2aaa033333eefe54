"""Test cases that start from real images (``cases.images``): each origin is the generator's reconstruction of a
real image, from the noise its inversion found (:class:`~hynea_pl.generators.inversion.DDIMInversion`).

The images of each selected class are taken in the source's order. An image is a valid origin (paper 4.5, as for
seeded origins) when the SUT reads both the real image and its reconstruction as the image's class; otherwise the
next image of the class is tried, at most ``cases.max_seed_tries`` of them per case (the record's ``skipped_seeds``
counts the images passed over). Every method then starts from the same noise and reconstruction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
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


def _images(n: int, adjective: str = "") -> str:
    return f"no {adjective}image" if n == 0 else f"{n} {adjective}image" + ("s" if n != 1 else "")


def check_plan_served(selection: CaseSelection, counts: Mapping[tuple[int, ...], int], skipped: int = 0) -> None:
    """Refuse a plan larger than its images: ``ValueError``, one line with the numbers, when ``cases.images`` holds
    fewer images of a class (``counts``: images per label, a 1-tuple per class) than its selected cases need, one
    origin each (:func:`~hynea_pl.campaign.case_types.images_needed`). Such a case could only end without an origin,
    so the campaign is refused before any case runs and before its run folder exists, never silently cut short.
    ``skipped``: unreadable files the read skipped (the counts are then of readable images).

    The counts are an upper bound on the cases served: an image the SUT misreads (or whose reconstruction it
    misreads) is passed over while the campaign selects its origins, and a case that runs out of images then ends
    without a valid origin, in its record, as before."""
    from hynea_pl.campaign.case_types import case_id, images_needed

    needed = images_needed(selection)
    short = {c: counts.get((c,), 0) for c, n in needed.items() if counts.get((c,), 0) < n}
    if not short:
        return
    source = f"cases.images ({selection.images}" + (
        f", labels from {selection.labels_csv})" if selection.labels_csv else ")")
    readable, note = ("readable ", f" ({skipped} unreadable file(s) skipped)") if skipped else ("", "")
    empty = [c for c, have in short.items() if have == 0]
    if empty:
        named, it = ", ".join(map(str, empty)), "it" if len(empty) == 1 else "them"
        raise ValueError(f"cases.classes = {list(selection.classes)} asks cases of class {named} but {source} holds "
                         f"{_images(0, readable)} of class {named}{note}: drop {it} from cases.classes or add "
                         f"images of {it}")
    fewest = min(short, key=short.get)  # the first of the classes with the fewest images
    have, asked = short[fewest], needed[fewest]
    if selection.case_ids:
        last = case_id(fewest, asked - 1)
        raise ValueError(f"cases.case_ids asks case {last} of class {fewest} but {source} holds "
                         f"{_images(have, readable)} of class {fewest}{note}, one origin per case in order: ask cases "
                         f"{case_id(fewest, 0)} to {case_id(fewest, have - 1)} of it at most")
    others = f" (the fewest; {len(short)} classes hold fewer than {asked})" if len(short) > 1 else ""
    raise ValueError(f"cases.n_per_class = {asked} asks {asked} cases of class {fewest} but {source} holds "
                     f"{_images(have, readable)} of class {fewest}{note}{others}: lower cases.n_per_class to at "
                     f"most {have}")


def read_case_images(selection: CaseSelection, generator: Generator) -> LabelledImages:
    """``cases.images`` converted to the generator's image size and channels; refuses a generator that cannot be
    inverted before anything is read, and a plan larger than the images read (:func:`check_plan_served`: the
    config's check counts the files, this one the images that could be read)."""
    from hynea_pl.campaign.validation import class_count

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


__all__ = ["check_plan_served", "image_shape", "iter_image_cases", "read_case_images"]
