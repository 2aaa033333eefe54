"""A campaign's test cases as data: which cases it selects (:class:`CaseSelection`, the config's ``cases``
section), one case (:class:`TestCase`) and its id. A leaf: the modules that find, read and run cases import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

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
        spare_slots: in a batch, once no planned case waits for a slot, a case whose run ended without its result
            runs its later runs (its next targets) side by side in the free slots; the first result found ends it and
            every evaluation of its runs counts. Its record can then differ from the same case's at batch size 1
            (a later run may find first, and more runs spend evaluations); ``false``: a case's runs one after the
            other, every record as at batch size 1, and the batch's last cases run with slots left idle.
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
    spare_slots: bool = True
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


def images_needed(selection: Any) -> dict[int, int]:
    """How many images of each class the selected cases need at least, one origin each in the source's order
    (``cases.images``): ``n_per_class`` per class, or with ``case_ids`` the highest selected index of the class + 1
    (a class without a selected case needs none). ``selection``: a :class:`CaseSelection` or the config's parsed
    ``cases`` section; an unconditional class (``None``) is left out."""
    wanted = set(selection.case_ids or [])
    needed = {}
    for origin_class in selection.classes or []:
        if origin_class is None:
            continue
        if not wanted:
            needed[int(origin_class)] = int(selection.n_per_class)
            continue
        indices = [i for i in range(selection.n_per_class) if case_id(origin_class, i) in wanted]
        if indices:
            needed[int(origin_class)] = max(indices) + 1
    return needed


__all__ = ["CLASS_SEED_STRIDE", "CaseSelection", "TestCase", "case_id", "images_needed", "n_selected"]
