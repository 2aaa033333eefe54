"""natural: natural failures from real data, a reference row rather than a generator.

A case reads held-out real images of its class, one SUT evaluation per image, in an order drawn from the case's
seed, until the SUT misreads one (``SUT.is_flipped`` against the origin's decision, the criterion every method
shares) or the budget is spent. Its result is that real image, unchanged, judged by the same verdict (judges + realism
test) and stability variants as every other method, in the same record. The row answers "how many SUT evaluations
per valid failure does testing on more real data cost?" (``verdict_ceiling_sut_errors`` in the zoo's build is the
verdict's rate on the SUT's real errors; this row adds their cost).

Pool. Default ``zoo://full/held_out?start=9000``: held-out digits 9000-9999 of the zoo (the last 1,000 MNIST test
digits, about 100 per class), which no model of the zoo trained on. The realism test's reference is held-out 0-8999
(``reference_size: 9000``, as in ``configs/mnist_real.yaml``): a pool image inside the reference would pass the
typicality test trivially (it is its own nearest neighbour), so the pool is the held-out digits beyond it. The
``real`` suite's origins come from the same range, so the case's own digit is taken out of its pool: the pool image
nearest to the origin (RMS over pixels) when it lies within ``origin_tolerance`` (0.15). Measured on the first 6
digits of each class from held-out 9000 on (20 DDIM steps, 5 fixed-point iterations), a reconstruction lies 0.03-0.10
(median 0.06) from its own digit, which was the nearest pool image of its class for all 60 (the next nearest: 0.06 at
least, median 0.17); only the nearest is taken out. A validated origin is a digit the SUT reads correctly, so it could
never be the result: taking it out saves at most one evaluation, and other cases' origin digits stay in the pool.
Only images labelled with the case's class are drawn.

Order and counting. The order is ``torch.randperm`` of the class's pool images from a CPU ``torch.Generator``
seeded with the case's seed (the same on every machine). A step scores the next ``batch_size`` images of the order at
once (default 1), but counts them as read one at a time: up to and including the first misread image only, so the
count is that image's position in the order and no batch hides it. The result is that image (``found``). A case
whose pool runs out without a misread ends there (stop reason ``converged``); a case the budget stops keeps the
image closest to a flip (the lowest ``SUT.decision_margin``, the first in the order on a tie), ``found`` false.
With ``batch_size > 1`` the budget stops a case whose next batch could overrun it, so up to ``batch_size - 1``
evaluations of the budget may stay unspent; with 1 the budget is exact.

Plan. Every case reads its class's whole pool, each in its own order, so the pool's size bounds what a case reads,
not how many cases run: any ``cases.n_per_class`` is served (the origins' bound is ``cases.images``'s, refused in
one line when too small). A class of ``cases.classes`` the pool holds no image of is refused before any model is
built or run folder written (:meth:`NaturalCase.check_case_plan`, from the pool's labels alone).

Every record's ``diagnostics`` hold ``pool`` (the source), ``class_images`` (images of the class drawn from, the
origin's own taken out), ``excluded_origin`` (its source, or ``None``), ``read`` (images read, = ``sut_evals``),
``position`` (1-based place of the result in the order) and ``result_source`` (the result's source, e.g.
``held_out/9123``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from jsonargparse.typing import NonNegativeFloat, PositiveInt
from torch import Tensor
from torch.utils.data import DataLoader

from hynea_pl.campaign.test_images import read_test_images
from hynea_pl.data import LabelledImages
from hynea_pl.generators import Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.methods.origin import register_origin
from hynea_pl.suts import SUT, ClassifierSUT

#: The default pool: the zoo's held-out digits beyond the realism reference (held-out 0-8999).
DEFAULT_POOL = "zoo://full/held_out?start=9000"


# ---------------------------------------------------------------------- pure operators
@lru_cache(maxsize=4)
def read_pool(pool: str, shape: tuple[int, int, int]) -> LabelledImages:
    """The pool's labelled images as ``shape = (C, H, W)`` (:func:`~hynea_pl.campaign.test_images.read_test_images`,
    the one reader of real test images), read once per process and shared read-only by the cases."""
    return read_test_images(pool, shape[1:], shape[0])


def class_members(labels: list[tuple[int, ...]], origin_class: int) -> list[int]:
    """Indices of the images labelled ``origin_class`` alone, in the pool's order."""
    return [i for i, label in enumerate(labels) if label == (origin_class,)]


def origin_match(images: Tensor, origin: Tensor, tolerance: float) -> int | None:
    """Index of the image of ``images (N, C, H, W)`` nearest to ``origin (1, C, H, W)`` (RMS over pixels) when it
    lies within ``tolerance``, else ``None``: the origin's own image in the pool."""
    if len(images) == 0:
        return None
    distance = (images.float() - origin.float().cpu()).pow(2).flatten(1).mean(1).sqrt()
    index = int(distance.argmin())
    return index if float(distance[index]) <= tolerance else None


def draw_order(n: int, seed: int) -> list[int]:
    """A permutation of ``range(n)`` drawn from ``seed`` on a CPU generator (the same on every machine)."""
    return torch.randperm(n, generator=torch.Generator("cpu").manual_seed(int(seed))).tolist()


# ---------------------------------------------------------------------- the case
class NaturalCase(TestCaseModule):
    """One natural-failure case: real images of the case's class, read in a seeded order until the SUT misreads one.

    Args:
        generator: the campaign's generator (only for the case's origin, which every method shares).
        sut, origin_class, seed, target: see :class:`hynea_pl.baselines.search.PopulationSearchCase`; the seed draws the
        order.
        pool: the real images: ``zoo://<profile>/held_out[?start=N]`` or a folder of labelled images (sub-folders
            named by class), read by :func:`~hynea_pl.campaign.test_images.read_test_images`. Keep it out of the
            realism test's reference (see the module doc).
        batch_size: images scored per step; the count stops at the first misread image (see the module doc).
        origin_tolerance: the pool image nearest to the origin within this RMS distance is the origin's own, and
            is not drawn.
    """

    method_name = "natural"
    supported_tasks = (ClassifierSUT.task,)

    def __init__(
        self,
        generator: Generator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        pool: str = DEFAULT_POOL,
        batch_size: PositiveInt = 1,
        origin_tolerance: NonNegativeFloat = 0.15,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["generator", "sut"])
        if batch_size < 1:
            raise ValueError(f"natural: batch_size must be >= 1, got {batch_size}")
        if not str(pool).startswith("zoo://") and not Path(pool).is_dir():
            raise FileNotFoundError(f"natural: pool {pool}: no such folder (or give zoo://<profile>/held_out?start=N)")
        self.automatic_optimization = False
        self.generator = generator
        self.sut = sut
        self.pool = str(pool)
        self.batch_size = int(batch_size)
        self.origin_tolerance = float(origin_tolerance)
        self.images: Tensor | None = None  # the class's pool images in the drawn order (N, C, H, W), CPU
        self.sources: list[str] = []  # their sources, in the same order
        self.excluded_origin: str | None = None
        self.read = 0  # images of the order read so far (= sut_evals)
        self.position: int | None = None  # 1-based place of the result in the order
        self._best_margin = math.inf
        self._ready = False

    @classmethod
    def check_case_plan(cls, init_args: dict[str, Any], cases: Any) -> None:
        """Refuse, before any model is built (:func:`hynea_pl.campaign.validation.check_plan`), a selection the pool
        cannot serve: null ``cases.classes``, or a class the pool holds no image of (counted from the labels: a
        folder's file list, the zoo's held-out labels). Every case reads its class's whole pool, each in its own
        order, so the pool's size bounds what a case reads, not how many cases run: any ``n_per_class`` is served
        (the origins' own limit is ``cases.images``'s, checked beside this). One line, with the pool's counts."""
        pool = str(init_args.get("pool") or DEFAULT_POOL)
        if any(c is None for c in cases.classes or [None]):
            raise ValueError("natural draws real images of the case's class: give cases.classes (not null)")
        if not pool.startswith("zoo://") and not Path(pool).is_dir():
            return  # the module refuses a missing folder in one line when it is built
        from hynea_pl.campaign.test_images import count_test_labels

        try:
            counts = count_test_labels(pool)
        except (OSError, ValueError, RuntimeError, KeyError):
            return  # what the labels cannot tell is said where the pool is read
        missing = [c for c in cases.classes if counts.get((int(c),), 0) == 0]
        if missing:
            held = ", ".join(f"{n} of class {label[0]}" for label, n in sorted(counts.items()) if len(label) == 1)
            named, it = ", ".join(map(str, missing)), "it" if len(missing) == 1 else "them"
            raise ValueError(f"cases.classes = {list(cases.classes)} asks cases of class {named} but the natural "
                             f"pool (model.init_args.pool = {pool}) holds no image of class {named} (it holds "
                             f"{held or 'no image of one class'}): drop {it} from cases.classes or give a pool "
                             f"with images of {it}")

    @property
    def evals_per_step(self) -> int:
        """The next batch: ``batch_size`` images, fewer at the end of the order."""
        if self.images is None:
            return self.batch_size
        return min(self.batch_size, len(self.images) - self.read)

    # ------------------------------------------------------------------ case setup
    @torch.no_grad()
    def setup(self, stage: str) -> None:
        """The shared origin (:func:`register_origin`), then the class's pool images, the origin's own taken out,
        in the order the seed draws."""
        if self._ready:
            return
        register_origin(self, self.seed, self.origin_class, self.target_class)
        self.check_task(self.sut.task, self.method_name)
        if self.origin_class is None:
            raise ValueError("natural draws real images of the case's class: give cases.classes (not null)")
        pool = read_pool(self.pool, tuple(int(s) for s in self.origin_image.shape[1:]))
        members = class_members(pool.labels, int(self.origin_class))
        if not members:
            raise ValueError(f"natural: the pool {self.pool} has no images of class {self.origin_class}")
        images = pool.images[members]
        own = origin_match(images, self.origin_image, self.origin_tolerance)
        if own is not None:
            self.excluded_origin = pool.sources[members[own]]
            members = members[:own] + members[own + 1:]
            images = torch.cat([images[:own], images[own + 1:]])
        if not members:
            raise ValueError(f"natural: the pool {self.pool} has no images of class {self.origin_class} "
                             f"but the origin's own ({self.excluded_origin})")
        order = draw_order(len(members), self.seed)
        self.images = images[order]
        self.sources = [pool.sources[members[i]] for i in order]
        self._ready = True

    def train_dataloader(self) -> DataLoader:
        """No data: each training step reads the next images of the order."""
        return DataLoader(range(self.trainer.max_steps if self.trainer.max_steps > 0 else 1), batch_size=None)

    def configure_optimizers(self) -> None:
        """Nothing is trained (Lightning's no-op optimizer)."""
        return None

    # ------------------------------------------------------------------ one step
    def training_step(self, batch: Any, batch_idx: int) -> dict:
        found = self.result.found
        stop = self.read >= len(self.images)
        if not found and not stop:
            with torch.no_grad():
                images = self.images[self.read:self.read + self.batch_size].to(self.origin_image.device)
                outputs = self.sut(images)
                flipped = self.sut.is_flipped(outputs, self.origin_output, self.target)
                margins = self.sut.decision_margin(outputs, self.origin_output, self.target).float()
            hits = torch.nonzero(flipped)[:, 0].tolist()
            read = hits[0] + 1 if hits else len(images)  # read one at a time: up to the first misread image
            first = self.read
            self.sut_evals += read
            self.read += read
            if hits:
                self._keep(first + hits[0], images[hits[0]:hits[0] + 1], outputs[hits[0]:hits[0] + 1], True)
            else:
                best = int(margins[:read].argmin())  # the first of equal margins
                if float(margins[best]) < self._best_margin:
                    self._best_margin = float(margins[best])
                    self._keep(first + best, images[best:best + 1], outputs[best:best + 1], False)
            found = self.result.found
            labels = self.sut.prediction(outputs[:read]).tolist()
            self.result.history.append({"step": self.global_step + 1, "read": self.read, "labels": labels,
                                        "min_margin": round(float(margins[:read].min()), 4), "found": found})
            if self._trainer is not None:
                self.optimizers().step()  # one batch = one optimisation step (``trainer.global_step``)
        if self._trainer is not None and not found and self.read >= len(self.images):
            self.trainer.should_stop = True  # the class's pool is spent
        loss = self.result.behaviour_loss
        return {"loss": torch.tensor(loss if math.isfinite(loss) else 0.0), "found": found}

    def _keep(self, index: int, image: Tensor, output: Tensor, found: bool) -> None:
        """Make the ``index``-th image of the order (``image (1, C, H, W)``, ``output (1, K)``) the case's result."""
        result = self.result
        result.image, result.output = image.detach(), output.detach()
        result.behaviour_loss = float(self.sut.behaviour_loss(result.output, self.objective, self.target))
        result.found, result.step = found, self.global_step + 1
        self.position = index + 1

    def record_diagnostics(self) -> dict[str, Any]:
        if self.images is None:
            return {}
        return {"pool": self.pool, "class_images": len(self.images), "excluded_origin": self.excluded_origin,
                "read": self.read, "position": self.position,
                "result_source": self.sources[self.position - 1] if self.position else None}


__all__ = ["DEFAULT_POOL", "NaturalCase", "class_members", "draw_order", "origin_match", "read_pool"]
