"""Which test cases a campaign runs, and how valid origins are found (paper section 4.5)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch
from rich.console import Console

from hynea_pl.generators import Generator
from hynea_pl.progress import StepProgress
from hynea_pl.suts import SUT

if TYPE_CHECKING:
    from hynea_pl.campaign.distributed import Shard
    from hynea_pl.campaign.factory import Components
    from hynea_pl.data import LabelledImages

#: Seeds of class ``c`` start at ``seed + c * CLASS_SEED_STRIDE``, so classes never share an initial noise.
CLASS_SEED_STRIDE = 100_000


@dataclass
class CaseSelection:
    """The test cases of a campaign: ``n_per_class`` origins of every class in ``classes``.

    Args:
        classes: conditioning classes of the origins; ``null`` for an unconditional generator (or a generator whose
            condition is fixed in its own config, e.g. a prompt). A binary SUT reads a class 0 / 1 as the tested
            attribute's decision the origin must have.
        n_per_class: test cases per class.
        seed: base seed of the initial noises (class ``c`` draws from ``seed + c * 100000`` on).
        max_seed_tries: seeds tried per case before it is recorded as having no valid origin.
        case_ids: run only these case ids (e.g. ``["c3-0"]``); empty runs all.
        validate_origins: skip origins the SUT does not classify as their class (paper 4.5); turn off only for
            generators whose samples the SUT cannot be expected to recognise (e.g. untrained test models).
        batch_size: cases adapting together in one module and one Trainer (:mod:`hynea_pl.methods.batched`); a
            case that ends leaves the batch and the next planned one takes its slot. 1: one Trainer per case.
            Only methods that can batch (HyNeA) take more than 1; the campaign refuses the others.
        images: start every case from a real image instead of a seed: a folder of labelled images (sub-folder
            names are the labels, or ``labels_csv``) or ``zoo://<profile>/held_out[?start=N]`` (the zoo's held-out
            real digits). Each image is inverted to the generator's noise (:mod:`hynea_pl.campaign.image_cases`);
            ``max_seed_tries`` then bounds the images tried per case. ``None``: origins from seeds.
        labels_csv: with a folder: a CSV of ``file,label`` rows instead of sub-folder labels.
        inversion: the :class:`~hynea_pl.generators.inversion.DDIMInversion` settings (``fixed_point_iterations``,
            ``refine_steps``, ``refine_lr``).
    """

    classes: list[int | None] = field(default_factory=lambda: list(range(10)))
    n_per_class: int = 3
    seed: int = 0
    max_seed_tries: int = 20
    case_ids: list[str] = field(default_factory=list)
    validate_origins: bool = True
    batch_size: int = 1
    images: str | None = None
    labels_csv: str | None = None
    inversion: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"cases.batch_size must be >= 1, got {self.batch_size}")
        if self.labels_csv is not None and self.images is None:
            raise ValueError("cases.labels_csv goes with cases.images (the folder it labels)")
        from hynea_pl.generators.inversion import DDIMInversion

        self.inversion = dict(self.inversion or {})
        try:
            DDIMInversion(**self.inversion)
        except TypeError:
            known = "fixed_point_iterations, refine_steps, refine_lr"
            raise ValueError(f"cases.inversion takes {known}; got {sorted(self.inversion)}") from None


@dataclass(frozen=True)
class TestCase:
    """One origin: its class, the seed of its initial noise, how many seeds were skipped to find it, and the origin
    image ``(1, C, H, W)`` on CPU when validating it sampled it (every method then starts from exactly that image).

    A case from a real image (``cases.images``) also carries the inversion's ``noise`` (then the seed only seeds
    the case's own randomness), the ``real`` image ``(1, C, H, W)``, its ``source`` (a path in the folder, or
    ``held_out/<index>``) and the inversion's quality (``latent_error``, ``ms_ssim`` of the origin to the real
    image). ``condition`` is what the generator conditioned the origin on
    (:meth:`~hynea_pl.generators.Generator.case_condition`: the class, or a scene's layout)."""

    __test__ = False  # not a pytest test class

    case_id: str
    origin_class: int | None
    seed: int | None
    skipped_seeds: int
    origin: torch.Tensor | None = field(default=None, compare=False, repr=False)
    noise: torch.Tensor | None = field(default=None, compare=False, repr=False)
    real: torch.Tensor | None = field(default=None, compare=False, repr=False)
    source: str | None = None
    inversion: dict[str, float] | None = field(default=None, compare=False)
    condition: Any = field(default=None, compare=False)


def case_id(origin_class: int | None, index: int) -> str:
    """``c3-0`` for the first case of class 3; ``u-0`` for the first unconditional case."""
    return f"u-{index}" if origin_class is None else f"c{origin_class}-{index}"


def n_selected(selection: CaseSelection) -> int:
    """How many cases ``selection`` yields."""
    every = [case_id(c, i) for c in selection.classes for i in range(selection.n_per_class)]
    return len([cid for cid in every if not selection.case_ids or cid in set(selection.case_ids)])


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
