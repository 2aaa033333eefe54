"""Which test cases a campaign runs, and how valid origins are found (paper section 4.5)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
from rich.console import Console

from hynea_pl.campaign.case_types import CLASS_SEED_STRIDE, CaseSelection, TestCase, case_id, n_selected
from hynea_pl.generators import Generator
from hynea_pl.progress import StepProgress
from hynea_pl.suts import SUT

if TYPE_CHECKING:
    from hynea_pl.campaign.distributed import Shard
    from hynea_pl.campaign.factory import Components
    from hynea_pl.data import LabelledImages

def judges_read_layout(oracle: SUT | None, origin: torch.Tensor, condition: Any) -> bool:
    """Whether the ``oracle`` (a multi-label "class k present" judge) reads every digit a scene's layout placed in
    ``origin (1, C, H, W)``; ``True`` for a condition without placed classes or without an oracle."""
    classes = getattr(condition, "classes", None)
    if oracle is None or classes is None:
        return True
    output = oracle(origin)
    return all(oracle.judge_reading(output, int(k))[0] == 1 for k in set(classes))


@torch.no_grad()
def iter_cases(selection: CaseSelection, generator: Generator, sut: SUT,
               images: LabelledImages | None = None, oracle: SUT | None = None) -> Iterator[TestCase]:
    """Yield the selected cases in order, each with the first seed whose origin the SUT classifies as its class
    (and, for a scene generator, whose every placed digit the ``oracle`` reads: :func:`judges_read_layout`).

    Each origin is sampled once: the image that passed validation travels with its case. Seeds rejected for one
    case are never reused by the next. A case whose ``max_seed_tries`` seeds are all invalid is yielded with
    ``seed=None``. With ``cases.images``, the cases come from ``images`` (read by
    :func:`hynea_pl.campaign.image_cases.read_case_images` when not given) through
    :func:`hynea_pl.campaign.image_cases.iter_image_cases`.
    """
    if selection.images is not None:
        from hynea_pl.campaign.image_cases import iter_image_cases, read_case_images

        yield from iter_image_cases(selection, generator, sut,
                                    images if images is not None else read_case_images(selection, generator))
        return
    wanted = set(selection.case_ids)
    for origin_class in selection.classes:
        next_seed = selection.seed + (origin_class or 0) * CLASS_SEED_STRIDE
        for index in range(selection.n_per_class):
            cid = case_id(origin_class, index)
            found, skipped, image, condition = None, 0, None, None
            for candidate in range(next_seed, next_seed + selection.max_seed_tries):
                condition = generator.case_condition(origin_class, candidate)
                if not selection.validate_origins:
                    found = candidate
                    break
                origin = generator.sample(generator.initial_noise(candidate), condition)
                if (bool(sut.is_valid_origin(sut(origin), origin_class).all())
                        and judges_read_layout(oracle, origin, condition)):
                    found, image = candidate, origin.cpu()
                    break
                skipped += 1
            next_seed = (found if found is not None else next_seed + selection.max_seed_tries - 1) + 1
            if not wanted or cid in wanted:
                yield TestCase(cid, origin_class, found, skipped, image,
                               condition=condition if found is not None else None)


def select_cases(selection: CaseSelection, generator: Generator, sut: SUT,
                 console: Console | None = None, images: LabelledImages | None = None,
                 oracle: SUT | None = None) -> list[TestCase]:
    """Every selected case, with progress while the origins are sampled (or inverted) and validated."""
    cases = []
    with StepProgress("origins", n_selected(selection), unit="origin", console=console) as progress:
        for case in iter_cases(selection, generator, sut, images, oracle):
            cases.append(case)
            progress.update()
    return cases


def select_shared_cases(selection: CaseSelection, components: Components, shard: Shard,
                        console: Console | None = None, images: LabelledImages | None = None) -> list[TestCase]:
    """Every selected case, the same on every rank: each rank samples and validates the origins of its share of
    the classes (a class's seeds never depend on another class), then all ranks exchange them."""
    classes = list(selection.classes)
    mine = select_cases(replace(selection, classes=shard.take(classes)), components.generator, components.sut,
                        console=console, images=images, oracle=components.oracle)
    if shard.world_size == 1:
        return mine
    per_rank = shard.gather(mine)
    cases = []
    for index, origin_class in enumerate(classes):
        cases += [case for case in per_rank[index % shard.world_size] if case.origin_class == origin_class]
    return cases
