"""cfg-first-flip: the diffusion analogue of the truncation first-flip probe (``latent-truncation.txt``,
Algorithm 2, :mod:`hynea_pl.baselines.truncation`), with the classifier-free guidance scale in the role of psi.

A case is one seed of one class. Its origin is the LDM's image at the generator's own guidance scale ``s_0``,
``generator.sample(generator.initial_noise(seed), c)``: the campaign's shared origin, the image HyNeA, GIFTbench and
SINVAD start from. The probe re-renders the case from the SAME initial noise at guidance scales descending along a
schedule and stops at the first scale ``s*`` whose SUT decision left the origin's (``SUT.is_flipped``, the shared
test). One Lightning training step renders one image and costs at most one SUT evaluation (an image already scored
in the case is free), through :class:`hynea_pl.baselines.search.ProbeSearchCase`.

Schedule. A guided prediction is ``eps_u + s (eps_c - eps_u) = eps_c + (s - 1) (eps_c - eps_u)``: the guidance term
beyond the plain conditional model is scaled by ``s - 1``, as truncation scales ``w - w_avg`` by ``psi``.

- ``linear`` (default): keep the fractions {1.0, 0.8, 0.6, 0.4, 0.2, 0.0} of that term, ``s = 1 + (s_0 - 1) f``
  (for ``s_0 = 3``: 3.0, 2.6, 2.2, 1.8, 1.4, 1.0): 5 probes per case, the last one the unguided conditional model;
- an explicit list of absolute scales: it starts at ``s_0`` (the origin, not probed again) and strictly descends,
  to no lower than 1.0.

Scales below 1 are refused: the generator turns guidance off at ``s <= 1``, so every such scale renders the same
image as ``s = 1``. A generator sampling without guidance (``guidance_scale <= 1``, e.g. the style-based GAN) or
without a null condition is refused with one line.

Differences from the truncation probe: no acceptance gate (the campaign's origin validation plays Algorithm 2's step
2: an origin the SUT does not read as its class is skipped) and no SSIM / L2 screening. Direction: like a lower psi,
a higher guidance makes an image more typical of its class; descending the guidance loosens that adherence toward
the conditional model's own distribution.

Every record's ``diagnostics`` hold ``mode`` (``first-flip``), ``schedule`` (the scales, the origin's first),
``guidance_star`` (the first flipping scale; ``None`` when none flipped, or the budget ran out first) and ``probes``
(images rendered).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor

from hynea_pl.baselines.search import Probe, ProbeSearchCase, descends_from
from hynea_pl.generators import GUIDANCE, DiffusionGenerator
from hynea_pl.suts import SUT

#: Fractions of the guidance term ``s_0 - 1`` the ``linear`` schedule keeps, the origin's (1.0) first.
LINEAR_FACTORS: tuple[float, ...] = (1.0, 0.8, 0.6, 0.4, 0.2, 0.0)


# ---------------------------------------------------------------------- pure operators
def resolve_guidance_schedule(schedule: str | Sequence[float], default: float) -> tuple[float, ...]:
    """The guidance scales of a case whose origin is sampled at ``default``, the origin's first: ``"linear"``
    (``1 + (default - 1) f`` for ``f`` in :data:`LINEAR_FACTORS`) or an explicit list (strictly descending from
    ``default``, at least one probe, none below 1)."""
    if default <= 1:
        raise ValueError(f"cfg-first-flip descends the classifier-free guidance scale, but the generator samples "
                         f"without guidance (guidance_scale {default} <= 1)")
    if isinstance(schedule, str):
        if schedule != "linear":
            raise ValueError(f"unknown guidance schedule {schedule!r}; choose 'linear' or a list of scales")
        return (default, *(round(1.0 + (default - 1.0) * f, 6) for f in LINEAR_FACTORS[1:]))
    values = tuple(float(s) for s in schedule)
    if len(values) < 2 or not descends_from(values, default) or values[-1] < 1.0:
        raise ValueError(f"a guidance schedule starts at the generator's guidance_scale {default} and strictly "
                         f"descends to no lower than 1.0 (guidance is off at <= 1), got {list(values)}")
    return values


@contextmanager
def guidance(generator: DiffusionGenerator, scale: float) -> Iterator[DiffusionGenerator]:
    """Sample with ``generator.guidance_scale = scale`` inside the block; the shared generator's own scale is
    restored on exit (also on an error)."""
    default = generator.guidance_scale
    generator.guidance_scale = scale
    try:
        yield generator
    finally:
        generator.guidance_scale = default


# ---------------------------------------------------------------------- the case
class CFGFirstFlipCase(ProbeSearchCase):
    """One cfg-first-flip test case (one seed of one class); one probe image per step.

    Args:
        generator: the frozen LDM; its ``guidance_scale`` (> 1) samples the origin and starts the schedule.
        sut, origin_class, seed, target: see :class:`hynea_pl.baselines.search.PopulationSearchCase`.
        schedule: ``linear`` or a list of guidance scales descending from the generator's (see the module doc).
    """

    method_name = "cfg-first-flip"

    def __init__(
        self,
        generator: DiffusionGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        schedule: str | list[float] = "linear",
    ) -> None:
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, target=target)
        if not GUIDANCE(generator):
            raise ValueError(f"cfg-first-flip descends the classifier-free guidance scale, but the generator samples "
                             f"without guidance ({type(generator).__name__} has none)")
        self.schedule = resolve_guidance_schedule(schedule, float(generator.guidance_scale))
        self.method_name = self.display_name({"schedule": schedule})

    @classmethod
    def display_name(cls, init_args: dict) -> str:
        """``cfg-first-flip`` with the linear schedule, ``cfg-first-flip-custom`` with an explicit list."""
        return cls.method_name if isinstance(init_args.get("schedule", "linear"), str) else f"{cls.method_name}-custom"

    def setup_probes(self) -> None:
        _, uncond = self.generator.encode_condition(self.origin_class, 1)
        if uncond is None:
            raise ValueError(f"cfg-first-flip needs guided sampling: {type(self.generator).__name__} has no null "
                             f"condition for condition {self.origin_class!r}")
        self.info = {"mode": "first-flip", "schedule": list(self.schedule), "guidance_star": None, "probes": 0}

    def plan(self) -> Generator[Probe, Tensor, None]:
        """Algorithm 2 over the guidance scale: probe each scale below the origin's, stop at the first flip."""
        for scale in self.schedule[1:]:
            output = yield torch.tensor([[scale]], dtype=torch.float64), {"guidance": scale}
            if self.probe_flipped(output):
                self.info["guidance_star"] = scale
                self.keep_probe(found=True)
                return

    def render(self, genomes: Tensor) -> Tensor:
        """Guidance scales ``(n, 1)`` -> images ``(n, C, H, W)`` in [0, 1]: the case's noise sampled at each."""
        images = []
        for scale in genomes[:, 0].tolist():
            with guidance(self.generator, scale):
                images.append(self.generator.sample(self.noise, self.condition))
        return torch.cat(images)
