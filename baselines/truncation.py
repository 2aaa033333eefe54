"""The truncation probes (``latent-truncation.txt``: Algorithms 1 and 2, section 4.2.2, Table 1) on a
class-conditional style-based GAN (:class:`~hynea_pl.generators.stylegan.StyleGANGenerator`).

Truncation ``w' = w_avg + psi * (w - w_avg)`` (the generator's centre: per class for the zoo's GAN). A case is one
seed ``z`` of class ``c`` (the campaign's origin ``x_1.0 = G(z, c; 1.0)``, a GAN image, not the LDM's); one
Lightning training step renders one image and costs at most one SUT evaluation (an image already scored in the
case is free, as in every search here).

- **first-flip** (Algorithm 2): descend the schedule (``fixed`` {1.0, 0.9, ..., 0.5} or ``adaptive`` {1.0, 0.95,
  ..., 0.70, 0.60, 0.50}) and stop at the first ``psi*`` whose prediction is not ``c``.
- **style-mix** (Algorithm 1): for each truncation budget ``b`` of the schedule whose ``x_b`` passes the baseline
  gate, for each of the top-K rivals ``r`` of ``x_1.0`` (the same ``z`` mapped with class ``r``, truncated at
  ``b``) and each layer set ``L``: check that ``lambda = 1`` flips, then ``T`` bisection steps find the smallest
  flipping ``lambda`` of ``StyleMix(w_c, w_r, L, lambda)`` (``(1 - lambda) w_c + lambda w_r`` on ``L``); that
  candidate is screened (SSIM >= 0.95 and L2 <= 0.2 against ``x_b``); the first candidate that passes is the
  case's frontier and the case stops.
- **baseline acceptance gate** (4.2.2): ``argmax h(x) = c``, top probability >= ``p_min``, margin to the second
  >= ``delta``. A seed whose ``x_1.0`` fails it is dropped, unless ``salvage`` is on: first-flip then descends the
  schedule until the gate passes (the seed is salvaged at that ``psi``) and looks for the flip below it;
  style-mix skips the budgets whose ``x_b`` fails the gate.

Every record's ``diagnostics`` hold ``mode``, ``schedule``, ``baseline`` (gate outcome, probability, margin),
``salvaged_at``, ``psi_star`` (first-flip) or ``psi`` / ``lambda`` / ``rival`` / ``layers`` (style-mix), the
``screening`` outcome (SSIM, L2, passed) of the frontier and ``probes`` (images rendered).

Differences from the paper: the rival latent is the seed's ``z`` mapped with the rival class (the paper does not
say which latent); the bisection first checks ``lambda = 1`` (a rival that cannot flip costs one evaluation, not
``T``); the L2 of the screening is the root-mean-square difference (``hynea_pl.metrics.functional.image``); the
acceptance thresholds ``p_min`` / ``delta`` are not given in the paper (ours: 0.8 / 0.5).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import torch
from jsonargparse.typing import ClosedUnitInterval, PositiveFloat, PositiveInt
from torch import Tensor

from hynea_pl.baselines.search import Probe, ProbeSearchCase, descends_from
from hynea_pl.generators.stylegan import StyleGANGenerator
from hynea_pl.metrics.functional.image import l2_distance, ssim
from hynea_pl.suts import SUT, ClassifierSUT

#: The truncation study's psi schedules (section 4.2.2): ``fixed`` and ``adaptive``, each descending from 1.0.
FIXED_PSI_SCHEDULE: tuple[float, ...] = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
ADAPTIVE_PSI_SCHEDULE: tuple[float, ...] = (1.0, 0.95, 0.90, 0.85, 0.80, 0.75, 0.70, 0.60, 0.50)
SCHEDULES: dict[str, tuple[float, ...]] = {"fixed": FIXED_PSI_SCHEDULE, "adaptive": ADAPTIVE_PSI_SCHEDULE}
#: Layer sets the truncation study used for style mixing (REFERENCE.md), tried in this order.
LAYER_SETS: tuple[tuple[int, ...], ...] = ((7,), (6,), (5,), (4,), (3,), (5, 6), (3, 4), (3, 4, 5, 6))
MODES = ("first-flip", "style-mix")


# ---------------------------------------------------------------------- pure operators
def resolve_schedule(schedule: str | Sequence[float]) -> tuple[float, ...]:
    """``"fixed"`` / ``"adaptive"`` or an explicit list: strictly descending values in (0, 1] starting at 1.0."""
    values = SCHEDULES.get(schedule) if isinstance(schedule, str) else tuple(float(p) for p in schedule)
    if values is None:
        raise ValueError(f"unknown truncation schedule {schedule!r}; choose one of {sorted(SCHEDULES)} or a list")
    if not descends_from(values, 1.0) or values[-1] <= 0:
        raise ValueError(f"a truncation schedule descends from 1.0 and stays above 0, got {list(values)}")
    return values


def acceptance(probs: Tensor, c: int, p_min: float, delta: float) -> dict[str, Any]:
    """The baseline acceptance gate on one row of probabilities ``(K,)``: predicted ``c``, top probability >=
    ``p_min``, margin (top - second) >= ``delta``."""
    top2 = probs.float().topk(2)
    p1, p2 = float(top2.values[0]), float(top2.values[1])
    predicted = int(top2.indices[0])
    passed = predicted == c and p1 >= p_min and p1 - p2 >= delta
    return {"passed": bool(passed), "predicted": predicted, "p_top": round(p1, 4), "margin": round(p1 - p2, 4)}


def top_rivals(probs: Tensor, c: int, k: int) -> list[int]:
    """The ``k`` most probable classes other than ``c`` in ``probs (K,)``, most probable first."""
    order = probs.float().argsort(descending=True).tolist()
    return [r for r in order if r != c][:k]


def style_mix(w_c: Tensor, w_r: Tensor, layers: Sequence[int], lam: float) -> Tensor:
    """``(1 - lam) w_c + lam w_r`` on the W+ layers ``layers`` of ``(B, num_ws, w_dim)`` styles, ``w_c`` elsewhere."""
    out = w_c.clone()
    idx = list(layers)
    out[:, idx] = torch.lerp(w_c[:, idx], w_r[:, idx], float(lam))
    return out


def bisect_smallest_flip(flips, steps: int) -> float | None:
    """The smallest ``lambda`` in [0, 1] with ``flips(lambda)`` after ``steps`` bisection steps, assuming one
    boundary; ``None`` when ``lambda = 1`` does not flip. ``flips`` is called ``1 + steps`` times at most (a pure
    twin of the case's search, for tests)."""
    if not flips(1.0):
        return None
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if flips(mid):
            hi = mid
        else:
            lo = mid
    return hi


def screen(candidate: Tensor, source: Tensor, ssim_min: float = 0.95, l2_max: float = 0.2) -> dict[str, Any]:
    """Screening validity of ``candidate (1, C, H, W)`` against ``source``: SSIM >= ``ssim_min`` and RMS L2 <=
    ``l2_max`` (``hynea_pl.metrics.functional.image.screening_gate``'s definitions; kernel 11, 7 below 11 px)."""
    kernel = 11 if min(candidate.shape[-2:]) >= 11 else 7
    s = float(ssim(candidate, source, kernel_size=kernel, reduction="none")[0])
    d = float(l2_distance(candidate, source, mode="rms")[0])
    return {"ssim": round(s, 4), "l2": round(d, 4), "passed": bool(s >= ssim_min and d <= l2_max)}


# ---------------------------------------------------------------------- the case
class TruncationProbeCase(ProbeSearchCase):
    """One truncation-probe test case (one seed of one class); one probe image per step
    (:class:`hynea_pl.baselines.search.ProbeSearchCase`).

    Args:
        generator: the frozen style-based GAN; the origin is ``x_1.0`` (give it ``truncation_psi: 1.0``).
        sut, origin_class, seed, target, search_seed: see :class:`hynea_pl.baselines.search.PopulationSearchCase`.
        mode: ``first-flip`` (Algorithm 2) or ``style-mix`` (Algorithm 1).
        schedule: ``fixed``, ``adaptive`` or a descending list of psi from 1.0 (style-mix: the budgets ``B``).
        salvage: first-flip: a seed failing the baseline gate descends until it passes (otherwise it is dropped).
        p_min, delta: the baseline acceptance gate.
        top_k: rivals per seed (style-mix).
        layer_sets: W+ layer sets mixed (style-mix), tried in order; default :data:`LAYER_SETS`.
        search_steps: bisection steps ``T`` over lambda (style-mix).
        ssim_min, l2_max: the screening thresholds.
    """

    method_name = "truncation"
    supported_tasks = (ClassifierSUT.task,)

    def __init__(
        self,
        generator: StyleGANGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        mode: str = "first-flip",
        schedule: str | list[float] = "fixed",
        salvage: bool = False,
        p_min: ClosedUnitInterval = 0.8,
        delta: PositiveFloat = 0.5,
        top_k: PositiveInt = 3,
        layer_sets: list[list[int]] | None = None,
        search_steps: PositiveInt = 6,
        ssim_min: ClosedUnitInterval = 0.95,
        l2_max: PositiveFloat = 0.2,
        search_seed: int | None = None,
    ) -> None:
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, target=target,
                         search_seed=search_seed)
        if not isinstance(generator, StyleGANGenerator):
            raise TypeError(f"the truncation probes need a style-based GAN (StyleGANGenerator), "
                            f"got {type(generator).__name__}")
        if mode not in MODES:
            raise ValueError(f"unknown truncation probe mode {mode!r}; choose one of {list(MODES)}")
        if generator.truncation_psi != 1.0:
            raise ValueError(f"the probes start from x_1.0: give the generator truncation_psi 1.0, "
                             f"not {generator.truncation_psi}")
        self.mode, self.salvage = mode, salvage
        self.schedule = resolve_schedule(schedule)
        self.schedule_name = schedule if isinstance(schedule, str) else "custom"
        self.p_min, self.delta, self.top_k, self.search_steps = p_min, delta, top_k, search_steps
        self.layer_sets = [list(s) for s in (LAYER_SETS if layer_sets is None else layer_sets)]
        bad = [s for s in self.layer_sets if not s or any(not 0 <= i < generator.num_ws for i in s)]
        if bad:
            raise ValueError(f"layer sets must be non-empty subsets of 0..{generator.num_ws - 1}, got {bad}")
        self.ssim_min, self.l2_max = ssim_min, l2_max
        self.method_name = self.display_name({"mode": mode, "schedule": schedule})

    @classmethod
    def display_name(cls, init_args: dict) -> str:
        mode = init_args.get("mode", "first-flip")
        if mode == "style-mix":
            return "truncation-style-mix"
        schedule = init_args.get("schedule", "fixed")
        return f"truncation-first-flip-{schedule if isinstance(schedule, str) else 'custom'}"

    # ------------------------------------------------------------------ case setup
    def setup_probes(self) -> None:
        c = int(self.origin_class)
        self.w_c = self.generator.mapping(self.noise, c)
        probs = self.origin_output.float().softmax(-1)[0]
        self.baseline = acceptance(probs, c, self.p_min, self.delta)
        self.rivals = top_rivals(probs, c, self.top_k)
        self.info = {"mode": self.mode, "schedule": list(self.schedule), "baseline": self.baseline,
                     "salvaged_at": None, "probes": 0, "screening": None}

    def plan(self) -> Generator[Probe, Tensor, None]:
        return self._first_flip() if self.mode == "first-flip" else self._style_mix()

    def _truncated(self, psi: float, c: int) -> Tensor:
        return self.generator.truncate(self.w_c if c == self.origin_class else self.generator.mapping(self.noise, c),
                                       psi, c)

    def _accepts(self, output: Tensor) -> dict[str, Any]:
        return acceptance(output.float().softmax(-1).reshape(-1), int(self.origin_class), self.p_min, self.delta)

    # ------------------------------------------------------------------ Algorithm 2
    def _first_flip(self) -> Generator[Probe, Tensor, None]:
        accepted = self.baseline["passed"]
        if not accepted and not self.salvage:
            self.info["dropped"] = "baseline gate"
            return
        for psi in self.schedule[1:]:
            output = yield self._truncated(psi, int(self.origin_class)), {"psi": psi}
            if self.probe_flipped(output):
                if accepted:
                    self.info["psi_star"] = psi
                    self.keep_probe(found=True)
                    self.info["screening"] = screen(self.probe_image, self.origin_image, self.ssim_min, self.l2_max)
                    return
                self.info["dropped"] = f"flipped at psi {psi} before the gate passed"
                return
            if not accepted and self._accepts(output)["passed"]:
                accepted, self.info["salvaged_at"] = True, psi
        self.info["psi_star"] = None

    # ------------------------------------------------------------------ Algorithm 1
    def _style_mix(self) -> Generator[Probe, Tensor, None]:
        c = int(self.origin_class)
        for b in self.schedule:
            w_cb = self._truncated(b, c)
            if b == 1.0:
                gate, source = self.baseline, self.origin_image
            else:
                output = yield w_cb, {"psi": b, "source": True}
                gate, source = self._accepts(output), self.probe_image
            if not gate["passed"]:
                continue
            if b != 1.0 and not self.baseline["passed"] and self.info["salvaged_at"] is None:
                self.info["salvaged_at"] = b
            for rival in self.rivals:
                w_rb = self._truncated(b, rival)
                for layers in self.layer_sets:
                    output = yield style_mix(w_cb, w_rb, layers, 1.0), {"psi": b, "rival": rival, "lambda": 1.0}
                    if not self.probe_flipped(output):
                        continue
                    best, best_image, best_output = 1.0, self.probe_image, output
                    lo, hi = 0.0, 1.0
                    for _ in range(self.search_steps):
                        mid = (lo + hi) / 2
                        output = yield style_mix(w_cb, w_rb, layers, mid), {"psi": b, "rival": rival, "lambda": mid}
                        if self.probe_flipped(output):
                            hi, best, best_image, best_output = mid, mid, self.probe_image, output
                        else:
                            lo = mid
                    screening = screen(best_image, source, self.ssim_min, self.l2_max)
                    frontier = {"psi": b, "rival": rival, "lambda": best, "layers": layers, "screening": screening}
                    self.info.setdefault("candidates", []).append(frontier)
                    if screening["passed"] or not self.result.found and self.info.get("frontier") is None:
                        self.keep_probe(found=screening["passed"], image=best_image, output=best_output)
                        self.info.update(frontier)
                        self.info["frontier"] = screening["passed"]
                    if screening["passed"]:
                        return

    # ------------------------------------------------------------------ rendering a probe
    def render(self, genomes: Tensor) -> Tensor:
        return self.generator.synthesis(genomes)


# ---------------------------------------------------------------------- Table 1 of the truncation study
def table1_row(run_dir, embedder=None) -> dict[str, Any]:
    """Table 1's columns for a run folder of a probe (or any method), with the validity oracle in place of the
    human annotators and the embedder's mean pairwise L2 distance in place of LPIPS (no LPIPS weights here):

    - ``seeds``: seeds drawn (each case's seed plus the seeds the campaign skipped to find a valid origin);
    - ``frontiers``: cases whose SUT decision flipped; ``screened``: frontiers that passed the SSIM / L2 screening;
    - ``valid``: frontiers the oracle judges still read as the origin's class (verdict ``valid_failure``);
    - ``valid_rate`` = valid / frontiers, ``fault_rate`` = valid / seeds, ``seeds_per_valid`` = seeds / valid;
    - ``diversity``: mean pairwise distance of the valid results' embeddings (``None`` without an embedder or
      with fewer than two valid results).
    """
    from pathlib import Path

    from hynea_pl.images import load_image
    from hynea_pl.metrics.embedding import embed
    from hynea_pl.metrics.functional.search import seeds_per_valid
    from hynea_pl.schema import read_records
    from hynea_pl.verdicts import VALID_FAILURE

    run_dir = Path(run_dir)
    records = [r for r in read_records(run_dir / "records.jsonl") if r.error is None]
    seeds = sum(1 + (r.skipped_seeds or 0) for r in records)
    frontiers = [r for r in records if r.flipped]
    screened = [r for r in frontiers if ((r.diagnostics or {}).get("screening") or {}).get("passed")]
    valid = [r for r in frontiers if r.verdict == VALID_FAILURE]
    diversity = None
    if embedder is not None and len(valid) >= 2:
        images = torch.stack([load_image(run_dir / r.result_image) for r in valid])
        features = embed(embedder, images).double()
        distances = torch.cdist(features, features)
        n = len(valid)
        diversity = float(distances.sum() / (n * (n - 1)))
    return {"method": records[0].method if records else None, "seeds": seeds, "frontiers": len(frontiers),
            "screened": len(screened), "valid": len(valid),
            "valid_rate": len(valid) / len(frontiers) if frontiers else None,
            "fault_rate": len(valid) / seeds if seeds else None,
            "seeds_per_valid": seeds_per_valid(seeds, len(valid)), "diversity": diversity,
            "diversity_features": "zoo embedder L2 (LPIPS substitute)" if diversity is not None else None}
