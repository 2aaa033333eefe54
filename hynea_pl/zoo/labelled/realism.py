"""The zoo's realism inputs: its embedder as the features of FID / KID / PRDC, and its held-out digits as the
real reference. The metrics (:mod:`hynea_pl.metrics.realism`) know nothing of the zoo; the zoo hands them these."""

from __future__ import annotations

from torch import Tensor, nn

from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.zoo.profiles import get_profile
from hynea_pl.zoo.registry import load_component
from hynea_pl.zoo.splits import held_out_of, load_splits

__all__ = ["REALISM_K", "REALISM_QUANTILE", "ZooTypicality", "held_out_digits", "held_out_split",
           "zoo_realism_features"]

#: the zoo realism test's defaults: the distance to the nearest real digit, calibrated so that 95 % of them pass
REALISM_K, REALISM_QUANTILE = 1, 0.95


def zoo_realism_features(profile: str = "full") -> nn.Module:
    """The zoo embedder's penultimate features ``(B, 1, 32, 32) in [0, 1] -> (B, D)``, named
    ``zoo:<profile>/embedder`` in realism entries; builds the zoo on first use."""
    module = load_component(profile, "embedder")
    module.realism_name = f"zoo:{profile}/embedder"
    return module


def held_out_split(profile: str = "full") -> tuple[Tensor, Tensor]:
    """The zoo's held-out real digits ``(held_out, 1, 32, 32)`` in [0, 1] (the 10,000 MNIST test digits for
    ``full``), never trained on, and their classes ``(held_out,)``."""
    return held_out_of(get_profile(profile).data)


def held_out_digits(profile: str = "full") -> Tensor:
    """The images of :func:`held_out_split`."""
    return held_out_split(profile)[0]


class ZooTypicality(TypicalityTest):
    """The realism verdict's test on the zoo: the held-out real digits (never trained on) as the reference, in
    pixel space and in the zoo embedder's space (a model no method uses), calibrated so that ``quantile`` of
    held-out digits pass. :meth:`real_check_pass_rate`: the pass rate of the method split's training digits, real
    digits that are not in the reference (how well the calibration carries over to other real digits).

    Args:
        profile: zoo profile (built on first use).
        k: the k of the k-NN radius (1: the distance to the nearest real digit).
        quantile: fraction of held-out real digits that pass.
        reference_size: use only the first this many held-out digits as the reference (``None``: all). A campaign
            that starts from held-out digits (``cases.images: zoo://full/held_out?start=N``) sets it to ``N``, so
            that no origin is itself a reference digit its results would sit next to.
    """

    def __init__(self, profile: str = "full", k: int = REALISM_K, quantile: float = REALISM_QUANTILE,
                 reference_size: int | None = None) -> None:
        reference = held_out_digits(profile)
        if reference_size is not None:
            if not 2 <= reference_size <= len(reference):
                raise ValueError(f"reference_size must be in 2..{len(reference)}, got {reference_size}")
            reference = reference[:reference_size]
        super().__init__(reference, zoo_realism_features(profile), k=k, quantile=quantile)
        self.profile, self.reference_size = profile, reference_size
        self.training_data = {"zoo-digits:held_out"}  # its reference (its embedder names its own training digits)

    def real_check_pass_rate(self) -> float:
        """The pass rate of the method split's first 2000 training digits (computed on request: a campaign never
        needs it)."""
        return self.pass_rate(load_splits(get_profile(self.profile).data).method.train_images[:2000])
