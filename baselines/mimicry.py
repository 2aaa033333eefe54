"""Mimicry (Weissl et al., 2025): a multi-objective style-mixing search in a class-conditional StyleGAN's W+ space.

As HyNeA's authors ran it (``../shared/REFERENCE.md``, Mimicry; HyNeA paper 4.3, 4.5):

- origin latent ``w0`` from the case's ``(seed, class)``: ``z0 = generator.initial_noise(seed)``, the origin image
  is ``synthesis(w0)`` (so the origin is a GAN image, not the LDM's image of the same seed);
- a second latent ``wn`` of the SUT's second most likely class on the origin (the case's target), from the first
  ``z`` drawn from the case's search seed (with the default ``search_seed = seed`` that is ``z0`` itself, rendered for
  the rival class);
- genome = one interpolation weight ``alpha`` per style layer in the mixing range ``layers`` (default: all
  ``num_ws``); the mixed style of layer ``l`` is ``w_avg + alpha_l (wn - w_avg) + (1 - alpha_l)(w0 - w_avg)``
  (:func:`mixed_styles`); the other layers keep ``w0``;
- pymoo's AGE-MOEA2 with Latin hypercube sampling, bounds [0, 1], population 100, driven through pymoo's
  ask / tell interface: one Lightning training step asks for one generation, renders and scores it, and tells the
  objectives back; 25 generations after the initial population (``generations``);
- objectives: HyNeA's image distance to the origin (normalised Frobenius) and its behaviour loss (cross entropy
  toward the target), both minimised;
- stop as soon as any individual flips the SUT (``FlipEarlyStopping``); the campaign's budget (2700) holds.

The record's ``diagnostics`` hold the rival class (``wn``'s class), the origin truncation ``psi``, the mixed layers
and the ``alphas`` of the result.

Binary multi-label task (a :class:`~hynea_pl.suts.BinaryAttributeSUT`, e.g. CelebA's 40 attributes; HyNeA paper
Table 1 reports Mimicry on CelebA). The papers say only that Mimicry used the same loss terms as HyNeA and that it
"struggles due to the absence of clear target classes": with an unconditional face GAN no latent is "of" a target
attribute. The rest is our reading, stated here and in ``configs/ffhq_mimicry_stylegan2.yaml``:

- the target is the SUT's tested attribute (``SUT.default_target``); a case looks for the tested attribute flipped,
  ``SUT.is_flipped`` (the tested logit's sign differs from the origin's), the stop every method shares;
- the objectives stay HyNeA's image distance and the SUT's own ``behaviour_loss`` (BCE over the attribute logits
  toward the origin's decisions with the tested one inverted, paper eq. 5);
- there is no rival class, so ``wn`` is the latent of a second ``z`` drawn from the case's search seed under the
  origin's condition (none for an unconditional GAN): the draws after the stream's first ``(1, z_dim)`` draw, which
  is skipped because with the default ``search_seed`` (= ``seed``) it is the origin's own ``z`` (``wn`` would be
  ``w0`` and the search would have nothing to mix). ``rival_draws = 1`` (default; our reading of the paper's setup):
  that draw as it is, read by no SUT (free); nothing makes it carry the flipped attribute, consistent with the
  paper's "no target of the required semantic class" and its misclassification rate of 0.01 on CelebA.
  ``rival_draws = k > 1`` (a stronger variant, not the paper's): ``z_1 .. z_k`` are drawn up front, ``wn`` is the first
  whose image the SUT reads with the tested attribute flipped, else ``z_1``; the images are read one at a time at the
  start of the first generation, each read is one SUT evaluation (``sut_evals``), and ``evals_per_step`` counts the
  pending reads, so the budget still never overruns;
- ties in fitness are broken by the tested logit signed toward the origin's decision (the shared
  :func:`hynea_pl.baselines.search.attribute_margin`);
- ``diagnostics``: ``rival`` is ``None`` (no class); ``rival_draw`` (0-based index of the draw used),
  ``rival_flipped`` (whether the SUT read ``wn``'s image flipped; ``None`` when not read) and ``rival_evals`` (the SUT
  evaluations the choice cost) are added.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from jsonargparse.typing import PositiveInt
from torch import Tensor

from hynea_pl.baselines.search import PopulationSearchCase
from hynea_pl.generators.stylegan import StyleGANGenerator
from hynea_pl.objectives import frobenius_distance
from hynea_pl.suts import SUT, BinaryAttributeSUT, ClassifierSUT


# ---------------------------------------------------------------------- pure operators
def mixed_styles(alphas: Tensor, w0: Tensor, wn: Tensor, w_avg: Tensor, layers: list[int]) -> Tensor:
    """W+ styles ``(P, num_ws, w_dim)`` of genomes ``alphas (P, len(layers))``: on layer ``layers[j]``,
    ``w_avg + alpha_j (wn - w_avg) + (1 - alpha_j)(w0 - w_avg)``; elsewhere ``w0``.

    ``w0``, ``wn``: ``(1, num_ws, w_dim)``; ``w_avg``: ``(1, w_dim)`` (or broadcastable to ``w0``). Algebraically the
    centre cancels (``alpha wn + (1 - alpha) w0``); it is kept in the form the authors wrote.
    """
    if alphas.dim() != 2 or alphas.shape[1] != len(layers):
        raise ValueError(f"alphas must be (P, {len(layers)}), got {tuple(alphas.shape)}")
    centre = w_avg.reshape(1, 1, -1) if w_avg.dim() == 2 else w_avg
    ws = w0.expand(alphas.shape[0], -1, -1).clone()
    a = alphas[:, :, None].to(ws)
    ws[:, layers] = centre + a * (wn[:, layers] - centre) + (1 - a) * (w0[:, layers] - centre)
    return ws


def image_distances(origin: Tensor, images: Tensor) -> Tensor:
    """HyNeA's normalised Frobenius distance of each image ``(P, C, H, W)`` to ``origin (1, C, H, W)``: ``(P,)``."""
    return torch.stack([frobenius_distance(origin, image[None]) for image in images])


def make_algorithm(n_var: int, population_size: int, seed: int):
    """pymoo AGE-MOEA2 with Latin hypercube sampling over ``[0, 1]^n_var`` (two objectives), set up for ask / tell."""
    from pymoo.algorithms.moo.age2 import AGEMOEA2
    from pymoo.core.problem import Problem
    from pymoo.operators.sampling.lhs import LHS

    problem = Problem(n_var=n_var, n_obj=2, xl=0.0, xu=1.0)
    algorithm = AGEMOEA2(pop_size=population_size, sampling=LHS())
    algorithm.setup(problem, seed=seed, verbose=False)
    return algorithm, problem


def tell_objectives(algorithm, problem, population, objectives: np.ndarray) -> None:
    """Hand the objectives ``(P, 2)`` of the asked ``population`` back to pymoo (its documented ask / tell way)."""
    from pymoo.core.evaluator import Evaluator
    from pymoo.problems.static import StaticProblem

    Evaluator().eval(StaticProblem(problem, F=objectives), population)
    algorithm.tell(infills=population)


# ---------------------------------------------------------------------- the case
class MimicryCase(PopulationSearchCase):
    """One Mimicry test case on a :class:`~hynea_pl.generators.stylegan.StyleGANGenerator`.

    Args:
        generator: the frozen style-based GAN (origins are its images at its ``truncation_psi``).
        sut, origin_class, seed, target, search_seed, chunk_size: see
        :class:`hynea_pl.baselines.search.PopulationSearchCase`
            (the target, default the origin's second most likely class, is the class of ``wn``).
        population_size: AGE-MOEA2's population (and offspring per generation).
        generations: generations after the initial population (25: 2600 fresh images at most); ``None``: until the
            budget.
        layers: the W+ layers mixed (one alpha each); ``None``: all of them.
        rival_draws: binary task only: ``z`` draws tried for ``wn`` (see the module doc); 1 = a plain second draw.
    """

    method_name = "mimicry"
    supported_tasks = (ClassifierSUT.task, BinaryAttributeSUT.task)

    def __init__(
        self,
        generator: StyleGANGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        population_size: PositiveInt = 100,
        generations: PositiveInt | None = 25,
        layers: list[int] | None = None,
        search_seed: int | None = None,
        chunk_size: PositiveInt | None = None,
        rival_draws: PositiveInt = 1,
    ) -> None:
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, target=target,
                         population_size=population_size, survivors=population_size, search_seed=search_seed,
                         chunk_size=chunk_size)
        if not isinstance(generator, StyleGANGenerator):
            raise TypeError(f"Mimicry needs a style-based GAN (StyleGANGenerator), got {type(generator).__name__}")
        if generations is not None and generations < 0:
            raise ValueError(f"generations must be >= 0 (or null), got {generations}")
        self.generations = generations
        self.layers = list(range(generator.num_ws)) if layers is None else [int(i) for i in layers]
        bad = [i for i in self.layers if not 0 <= i < generator.num_ws]
        if bad or not self.layers:
            raise ValueError(f"layers must be a non-empty subset of 0..{generator.num_ws - 1}, got {layers}")
        if rival_draws < 1:
            raise ValueError(f"rival_draws must be >= 1, got {rival_draws}")
        if rival_draws != 1 and getattr(sut, "target_is_class", True):
            raise ValueError("rival_draws is for a binary SUT: a multiclass wn is a latent of the rival class")
        self.rival_draws = rival_draws
        self._distances: dict[bytes, Tensor] = {}
        self._result_alphas: list[float] | None = None
        self._pending_rivals: Tensor | None = None  # binary task: the draws z (k, z_dim) wn is not chosen from yet
        self.rival_info: dict[str, Any] = {"rival_draw": None, "rival_flipped": None, "rival_evals": 0}

    @property
    def evals_per_step(self) -> int:
        """Every generation asks for ``population_size`` new individuals (pymoo removes duplicates); the first
        one of a binary case also reads at most the pending ``wn`` candidates."""
        pending = 0 if self._pending_rivals is None else self._pending_rivals.shape[0]
        return self.population_size + pending

    def setup_search(self) -> None:
        gen, c = self.generator, self.origin_class
        self.w0 = gen.styles(self.noise, c)
        if not self.sut.target_is_class:  # binary: the target is an attribute, no class to draw wn from
            self.rival = None
            # skip the stream's first z: with the default search seed (= seed) it is the origin's own z
            draws = [torch.randn((1, gen.z_dim), generator=self.rng) for _ in range(1 + self.rival_draws)][1:]
            self._pending_rivals = torch.cat(draws).to(self.noise.device)
            if self.rival_draws == 1:
                self.choose_rival()  # the only draw is the fallback: nothing to read
        else:
            z_rival = torch.randn((1, gen.z_dim), generator=self.rng).to(self.noise.device)
            self.rival = int(self.target[0])
            self.wn = gen.styles(z_rival, self.rival)
        self.centre = gen.w_avg(c)
        self.algorithm, self.problem = make_algorithm(len(self.layers), self.population_size, self.search_seed)

    @torch.no_grad()
    def choose_rival(self) -> None:
        """Binary task: ``wn (1, num_ws, w_dim)`` = the styles of the first pending draw whose image the SUT reads
        with the tested attribute flipped (``SUT.is_flipped``), else of the first draw. Images are read one at a
        time, one SUT evaluation each; a single draw is taken as it is, unread."""
        draws, self._pending_rivals = self._pending_rivals, None
        first = self.generator.styles(draws[:1], self.origin_class)
        self.wn = first
        self.rival_info = {"rival_draw": 0, "rival_flipped": None, "rival_evals": 0}
        if draws.shape[0] == 1:
            return
        self.rival_info["rival_flipped"] = False
        for k in range(draws.shape[0]):
            ws = first if k == 0 else self.generator.styles(draws[k:k + 1], self.origin_class)
            output = self.sut(self.generator.synthesis(ws))
            self.sut_evals += 1
            self.rival_info["rival_evals"] = k + 1
            if bool(self.sut.is_flipped(output, self.origin_output, self.target)[0]):
                self.wn = ws
                self.rival_info.update(rival_draw=k, rival_flipped=True)
                return

    def render(self, genomes: Tensor) -> Tensor:
        images = self.generator.synthesis(mixed_styles(genomes, self.w0, self.wn, self.centre, self.layers))
        for genome, distance in zip(genomes, image_distances(self.origin_image, images), strict=True):
            self._distances[self._digest(genome)] = distance
        return images

    def objectives(self, genomes: Tensor, outputs: Tensor) -> Tensor:
        """``(P, 2)``: image distance to the origin and behaviour loss toward the target (HyNeA's two terms)."""
        distance = torch.stack([self._distances[self._digest(g)] for g in genomes]).to(outputs.device)
        behaviour = torch.stack([self.sut.behaviour_loss(o[None], self.objective, self.target) for o in outputs])
        return torch.stack([distance.float(), behaviour.float()], dim=1)

    def fitness(self, genomes: Tensor, outputs: Tensor, found: Tensor) -> Tensor:
        """The scalar that picks the kept result among the individuals: HyNeA's unweighted sum of the two."""
        return self.objectives(genomes, outputs).sum(1)

    def training_step(self, batch: Any, batch_idx: int) -> dict:
        with torch.no_grad():
            if self._pending_rivals is not None:  # binary task, first generation: choose wn (counted evaluations)
                self.choose_rival()
            asked = self.algorithm.ask()
            genomes = torch.as_tensor(np.asarray(asked.get("X")), dtype=torch.float32, device=self.noise.device)
            outputs, fresh, images = self.evaluate(genomes)
            objectives = self.objectives(genomes, outputs)
            tell_objectives(self.algorithm, self.problem, asked, objectives.double().cpu().numpy())
            found = self.is_found(outputs)
            fitness = objectives.sum(1)
            margin = self.margin(outputs)
        step = self.global_step + 1
        generation_best = float(fitness.min())
        self.best_fitness = min(self.best_fitness, generation_best)
        self.population, self.fitness_values = genomes, fitness
        self._keep_result(images, outputs[fresh], fitness[fresh], margin[fresh], found[fresh])
        if self.result.step == step and self.result.image is not None:
            fresh_genomes = genomes[fresh]
            for j in range(images.shape[0]):
                if torch.equal(images[j:j + 1], self.result.image):
                    self._result_alphas = [round(float(a), 4) for a in fresh_genomes[j]]
                    break
        any_found = bool(found.any())
        entry = {"step": step, "best_fitness": generation_best, "found": any_found, "n_found": int(found.sum()),
                 "n_scored": int(fresh.sum()), "best_distance": float(objectives[:, 0].min()),
                 "best_behaviour": float(objectives[:, 1].min())}
        self.result.history.append(entry)
        self.log_dict({"best_fitness": generation_best, "found": float(any_found)}, prog_bar=True,
                      on_step=True, on_epoch=False)
        if self._trainer is not None:
            self.optimizers().step()  # one generation = one step of trainer.global_step
            if self.generations is not None and step >= self.generations + 1:
                self.trainer.should_stop = True
        return {"loss": torch.tensor(generation_best), "found": any_found}

    def record_diagnostics(self) -> dict[str, Any]:
        base = super().record_diagnostics()
        if not hasattr(self, "rival"):
            return base
        info = {**base, "rival": self.rival, "psi": self.generator.truncation_psi, "layers": self.layers,
                "alphas": self._result_alphas, "algorithm": "pymoo.AGEMOEA2(LHS)"}
        return info if self.sut.target_is_class else {**info, **self.rival_info}
