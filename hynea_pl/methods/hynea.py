"""HyNeA: one test case = one LightningModule that adapts a fresh HyperNet until the SUT's prediction flips."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from jsonargparse.typing import NonNegativeInt
from torch.utils.data import DataLoader

from hynea_pl.generators import HYPERNET_ADAPTER, DiffusionGenerator, require
from hynea_pl.hypernets import ControlProjector
from hynea_pl.images import as_saved, shifted_views
from hynea_pl.methods.base import RUN_FILE, TestCaseModule
from hynea_pl.methods.hynea_options import Acceptance, PaperSearch, RealismPrior, Retries, Steering
from hynea_pl.methods.origin import register_origin
from hynea_pl.methods.views import SearchViews
from hynea_pl.objectives import frobenius_distance
from hynea_pl.schedules import safe_pct_start
from hynea_pl.suts import SUT


class NonFiniteLossError(FloatingPointError):
    """The loss of a test case became NaN or infinite."""


class HyNeACase(TestCaseModule):
    """One HyNeA test case (paper sections 2.3 and 3).

    Frozen: the generator (denoiser, autoencoder, condition encoder) and the SUT. Trained: a fresh HyperNet
    (a copy of the denoiser's encoder half with zero layers) and a :class:`ControlProjector` that turns the SUT's
    control signal into a latent-shaped control. One training step runs the differentiable sampling chain from the
    stored initial noise, decodes, evaluates the SUT once and minimises ``distance + behaviour`` (paper eqs. 3-4).

    Args:
        generator: the frozen latent diffusion generator.
        sut: the system under test (its task defines loss, flip criterion and control signal).
        origin_class: conditioning class of the origin (set per case by the campaign's ``cases`` section).
        seed: seed of the stored initial noise (set per case by the campaign).
        target: explicit target class; default: the origin's second most likely class (with ``retries.retarget``, a
            later run's: the next most likely).
        search: the paper's search (:class:`~hynea_pl.methods.hynea_options.PaperSearch`): learning rates, schedule,
            stop on the target or on a flip.
        steering: a second model that must keep the origin's decision
            (:class:`~hynea_pl.methods.hynea_options.Steering`); no model: none (the paper).
        acceptance: what a step that reaches the target must also pass to count as found
            (:class:`~hynea_pl.methods.hynea_options.Acceptance`): the method's acceptance test, a margin past the
            boundary; none by default (the paper).
        retries: further runs of a case at fresh targets (:class:`~hynea_pl.methods.hynea_options.Retries`); one run
            by default (the paper).
        prior: the realism prior (:class:`~hynea_pl.methods.hynea_options.RealismPrior`); weight 0 by default.
        views: the semantics-keeping changes the SUT also reads each step (:class:`~hynea_pl.methods.views.SearchViews`,
            expectation over transformations): the behaviour term covers the image and ``views.count`` views of it,
            and a step counts as found only when the SUT also fails on ``views.fail_fraction`` of the views. Each view
            is one SUT evaluation. ``None`` or ``count`` 0: the SUT reads the image alone (the paper).
        attempt: which run of the case this module is (0: the first; set by the case loop).
        save_adapters: keep the HyperNet and projector weights that produced the result, so the campaign saves
            them beside a flipped case's record (``python -m hynea_pl replay`` regenerates the image from them).
            Costs one copy of the trainable weights whenever the kept result changes.

    The case stops when the SUT predicts the target (``found``, paper: early stop at the target); the record
    then also says whether the decision left the origin (``flipped``), which for a multiclass SUT holds whenever
    the target is reached.
    """

    method_name = "hynea"

    def __init__(
        self,
        generator: DiffusionGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        search: PaperSearch | None = None,
        steering: Steering | None = None,
        acceptance: Acceptance | None = None,
        retries: Retries | None = None,
        prior: RealismPrior | None = None,
        views: SearchViews | None = None,
        attempt: NonNegativeInt = 0,
        save_adapters: bool = False,
    ) -> None:
        super().__init__()
        require(generator, HYPERNET_ADAPTER, "HyNeA")
        self.search = search if search is not None else PaperSearch()
        self.steering = steering if steering is not None else Steering()
        self.acceptance = acceptance if acceptance is not None else Acceptance()
        self.retries = retries if retries is not None else Retries()
        self.prior = prior if prior is not None else RealismPrior()
        self.views = views if views is not None else SearchViews()
        if not 0 <= attempt < self.retries.attempts:
            raise ValueError(f"attempt must be in 0..retries.attempts-1, got {attempt} of {self.retries.attempts}")
        self.save_hyperparameters(ignore=["generator", "sut", "search", "steering", "acceptance", "retries", "prior",
                                          "views"])
        self.generator = generator
        self.sut = sut
        self.hypernet = generator.make_hypernet()
        if getattr(generator, "channels_last", False):  # the trainable copy follows the frozen model's layout
            self.hypernet.to(memory_format=torch.channels_last)
        self.projector: ControlProjector | None = None
        self._initial_behaviour: torch.Tensor | None = None
        self._result_weights: dict[str, dict[str, torch.Tensor]] | None = None

    @property
    def reference(self) -> SUT | None:
        """The steering model (``steering.model``), or ``None``."""
        return self.steering.model

    # ------------------------------------------------------------------ case setup
    @torch.no_grad()
    def setup(self, stage: str) -> None:
        """Generate the origin from the stored noise and condition, read the SUT, fix target and control."""
        if self.projector is not None:
            return
        hp = self.hparams
        register_origin(self, hp.seed, hp.origin_class, hp.target, hp.attempt if self.retries.retarget else 0)
        device = self.origin_image.device
        self.register_buffer("control", self.sut.control_signal(self.origin_output, self.target), persistent=False)
        origin_margin = float(self.sut.decision_margin(self.origin_output, self.origin_output, self.target)[0])
        accept = self.acceptance
        self.required_margin = max(accept.margin, accept.margin_ratio * max(origin_margin, 0.0))
        if accept.test is not None:
            if hp.origin_class is None:
                raise ValueError("model.acceptance.test checks a result against its origin's class; these cases have "
                                 "none")
            accept.test.to(device)
        if self.reference is not None:
            self.reference.to(device)
            self.register_buffer("reference_origin_output", self.reference(self.origin_image), persistent=False)
        self.projector = ControlProjector(self.control.shape[1:], self.generator.latent_shape).to(device)

    @property
    def evals_per_step(self) -> int:
        """One SUT evaluation for the image and one per view (:attr:`views`)."""
        return 1 + self.views.count

    def train_dataloader(self) -> DataLoader:
        """HyNeA has no data: each training step is one adaptation step of the HyperNet."""
        return DataLoader(range(self.trainer.max_steps if self.trainer.max_steps > 0 else 1), batch_size=None)

    @property
    def learning_rates(self) -> tuple[float, float]:
        """This run's ``(lr_min, lr_max)`` (``search``)."""
        return self.search.lr_min, self.search.lr_max

    def later_attempt(self) -> dict | None:
        """The arguments of the case's run after this one (``{"attempt": n + 1}``: its target and learning rates
        follow from it) while runs are left, whatever this one finds; ``None`` after the last."""
        hp = self.hparams
        return {"attempt": hp.attempt + 1} if hp.attempt + 1 < self.retries.attempts else None

    def next_attempt(self) -> dict | None:
        """After this run: :meth:`later_attempt` when it ended without a found result, ``None`` otherwise. The case
        loop also ends the case when its budget cannot pay one more step."""
        if self.result.found or not self.has_origin:
            return None
        return self.later_attempt()

    def run_arguments(self) -> dict:
        """``{"attempt": n}``: the run of the case this module is (its target and learning rates follow from it)."""
        return {"attempt": self.hparams.attempt}

    def attempt_summary(self) -> dict:
        """This run in the record's ``diagnostics.attempts``: its target, learning rates and whether it found its
        result."""
        lr_min, lr_max = self.learning_rates
        target = int(self.target[0]) if self.has_origin else None
        return {"attempt": self.hparams.attempt, "target": target, "lr_min": lr_min, "lr_max": lr_max,
                "found": self.result.found}

    def configure_optimizers(self):
        """AdamW(lr_min) with OneCycleLR(max_lr=lr_max) stepped every optimisation step (this run's rates,
        :attr:`learning_rates`)."""
        params = [*self.hypernet.parameters(), *self.projector.parameters()]
        lr_min, lr_max = self.learning_rates
        optimizer = torch.optim.AdamW(params, lr=lr_min, weight_decay=self.search.weight_decay)
        scheduler = self.one_cycle(optimizer, self.trainer.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def one_cycle(self, optimizer: torch.optim.Optimizer, max_steps: int | None) -> torch.optim.lr_scheduler.OneCycleLR:
        """This run's OneCycle schedule on ``optimizer``: from ``lr_min`` up to ``lr_max`` and down, over
        ``total_steps`` (else the Trainer's ``max_steps``)."""
        search = self.search
        lr_min, lr_max = self.learning_rates
        total = search.total_steps or max_steps
        if total is None or total <= 0:
            raise ValueError("HyNeACase needs trainer.max_steps (or model.init_args.search.total_steps) for its OneCycle "
                             "schedule")
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=lr_max, total_steps=total, pct_start=safe_pct_start(search.pct_start, total),
            div_factor=lr_max / lr_min, cycle_momentum=False)

    # ------------------------------------------------------------------ one adaptation step
    def generate_latents(self) -> torch.Tensor:
        """The adapted chain's latents ``(1, c, h, w)`` (differentiable)."""
        control = self.projector(self.control)
        return self.generator.denoise(self.noise, self.condition, hypernet=self.hypernet, control=control)

    def generate(self) -> torch.Tensor:
        """The adapted chain's image ``(1, C, H, W)`` in [0, 1] (differentiable)."""
        return self.generator.decode(self.generate_latents(), self.condition)

    def prior_loss(self, latents: torch.Tensor, step: int | None = None) -> torch.Tensor:
        """The realism prior on ``latents``: the frozen denoiser's loss at a timestep and noise drawn from the
        case's seed and 1-based ``step`` (default: the Trainer's next step), the same draws on every run."""
        hp = self.hparams
        index = self.global_step if step is None else step - 1
        draw = torch.Generator().manual_seed(hp.seed * 100_003 + index)
        low, high = self.prior.timesteps
        total = self.generator.scheduler.config.num_train_timesteps
        t = torch.randint(int(low * total), max(int(high * total), int(low * total) + 1), (1,), generator=draw)
        noise = torch.randn(latents.shape, generator=draw)
        return self.generator.denoising_loss(latents, self.condition, t.to(latents.device)[0], noise)

    @staticmethod
    def as_read(images: torch.Tensor) -> torch.Tensor:
        """``images (B, C, H, W)`` as the SUT reads them: as saved (8-bit), gradients straight through the rounding."""
        return images + (as_saved(images) - images).detach()

    def reference_inputs(self, images: torch.Tensor) -> torch.Tensor:
        """What the reference judges for one case's image ``(1, C, H, W)``: the image, or its views ``(6, C, H, W)``
        with ``steering.views``."""
        return shifted_views(images) if self.steering.views else images

    def sut_inputs(self, images: torch.Tensor, step: int) -> torch.Tensor:
        """What the SUT reads at 1-based ``step`` for one case's image ``(1, C, H, W)``: the image, then its
        :attr:`views` ``(1 + count, C, H, W)``, each as read (8-bit). The views are drawn from the case's seed, run and
        step: the same on every path and machine."""
        if not self.views.count:
            return images
        hp = self.hparams
        draw = torch.Generator().manual_seed(7_777_777 + hp.seed * 100_003 + hp.attempt * 10_007 + step)
        return torch.cat([images, self.as_read(self.views(images, draw))])

    def training_step(self, batch: int, batch_idx: int) -> dict:
        step = self.global_step + 1
        latents = self.generate_latents()
        images = self.as_read(self.generator.decode(latents, self.condition))
        output = self.sut(self.sut_inputs(images, step))
        reference_output = None if self.reference is None else self.reference(self.reference_inputs(images))
        loss, found, logged = self.case_step(step, latents, images, output, reference_output)
        self.log_dict({"loss": loss, **logged, "found": float(found)}, prog_bar=True, on_step=True, on_epoch=False)
        return {"loss": loss, "found": found}

    def case_step(self, step: int, latents: torch.Tensor, images: torch.Tensor, output: torch.Tensor,
                  reference_output: torch.Tensor | None) -> tuple[torch.Tensor, bool, dict[str, torch.Tensor]]:
        """The rule of one adaptation step of this case, for the single and the batched path alike
        (:mod:`hynea_pl.methods.batched`): counts the SUT evaluation, builds the loss (distance + behaviour,
        prior, the reference's preservation), decides ``found`` (target or flip, the acceptance margin, the steering model's
        stop rule) and keeps the result.

        Args:
            step: the case's 1-based step.
            latents: the case's adapted latents ``(1, c, h, w)``.
            images: the case's image ``(1, C, H, W)`` as the SUT read it (:meth:`as_read`).
            output: the SUT's output on :meth:`sut_inputs` of ``images``: the image's first, then its views'.
            reference_output: the reference's output on :meth:`reference_inputs` of ``images`` (``None`` without
                a reference).

        Returns ``(loss, found, logged)``; raises :class:`NonFiniteLossError` on a NaN / infinite loss.
        """
        hp = self.hparams
        read = len(output)  # the image and its views
        self.sut_evals += read
        distance = frobenius_distance(self.origin_image, images)
        behaviour = self.sut.behaviour_loss(output, self.objective.expand(read, *self.objective.shape[1:]),
                                            self.target.expand(read))
        output, view_output = output[:1], output[1:]
        if self.search.normalize_behaviour:
            if self._initial_behaviour is None:
                self._initial_behaviour = behaviour.detach().clamp_min(1e-8)
            behaviour_term = behaviour / self._initial_behaviour
        else:
            behaviour_term = behaviour
        loss = distance + behaviour_term
        logged = {"distance": distance, "behaviour": behaviour}
        if self.prior.weight:
            prior = self.prior_loss(latents, step)
            loss = loss + self.prior.weight * prior
            logged["prior"] = prior
        test = self.sut.reaches_target if self.search.stop_on == "target" else self.sut.is_flipped
        found = bool(test(output, self.origin_output, self.target).all())
        if self.required_margin:
            margin = self.sut.decision_margin(output.detach(), self.origin_output, self.target)
            found = found and bool((margin <= -self.required_margin).all())
        if len(view_output):
            failed = self.sut.is_flipped(view_output.detach(), self.origin_output, self.target.expand(len(view_output)))
            found = found and self.views.enough_failed(failed)
            logged["views_failed"] = failed.float().mean()
        if self.reference is not None:
            views = len(reference_output)
            origin_output = self.reference_origin_output.expand(views, *self.reference_origin_output.shape[1:])
            steering = self.steering
            if steering.weight:
                keep = self.reference.keep_loss(reference_output, origin_output)
                loss = loss + steering.weight * keep
                logged["keep"] = keep
            kept = bool(self.reference.keeps(reference_output.detach(), origin_output,
                                             self.target.expand(views), steering.margin).all())
            found = found and (kept or not steering.stop)
            logged["reference_kept"] = float(kept)
        if self.acceptance.test is not None and found:  # only a step that would stop asks (no SUT evaluation)
            found = bool(self.acceptance.test(images.detach(), torch.tensor([hp.origin_class])).all())
            logged["accepted"] = float(found)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"loss became {loss.detach().item()} at step {step}")
        self._keep_result(images.detach(), output.detach(), float(behaviour.detach()), found, step)
        return loss, found, logged

    def adapter_weights(self) -> dict[str, dict[str, torch.Tensor]]:
        """A copy of the HyperNet's and projector's weights now (a batched slot reads them from its stack)."""
        return {name: {k: v.detach().clone() for k, v in module.state_dict().items()}
                for name, module in (("hypernet", self.hypernet), ("projector", self.projector))}

    def _keep_result(self, images: torch.Tensor, output: torch.Tensor, behaviour: float, found: bool,
                     step: int) -> None:
        result = self.result
        result.history.append({"step": step, "behaviour": behaviour, "found": found})
        if result.found:
            return
        if found or behaviour < result.behaviour_loss:
            result.image, result.output, result.behaviour_loss = images, output, behaviour
            result.found, result.step = found, step
            if self.hparams.save_adapters:  # the weights that made this image (the optimiser steps after it)
                self._result_weights = self.adapter_weights()

    def record_diagnostics(self) -> dict:
        """With a reference: its decision on the origin and on the result (``prediction``, differential testing),
        and ``reference_kept``: whether it keeps the origin's reading of the case's target on the result (what
        ``steering.stop`` asks; for a reference of another task, e.g. a detector steering an attribute case,
        the only one of the three in the case's terms)."""
        if self.reference is None or self.result.output is None or not self.has_origin:
            return {}
        with torch.no_grad():
            result_output = self.reference(self.result.image.to(self.origin_image.device))
            flipped = self.reference.is_flipped(result_output, self.reference_origin_output, self.target)
        return {"reference_origin_label": int(self.reference.prediction(self.reference_origin_output)[0]),
                "reference_result_label": int(self.reference.prediction(result_output)[0]),
                "reference_kept": not bool(flipped.any())}

    # ------------------------------------------------------------------ replay
    def save_adapter(self, directory: Path) -> bool:
        """Save the HyNeA adapter that produced the result into ``directory``: its HyperNet and projector
        (``{hypernet,projector}``, diffusers ``save_pretrained``, safetensors) and which run of the case it is
        (:meth:`save_run`); ``False`` when ``save_adapters`` is off."""
        if not self.hparams.save_adapters or self._result_weights is None:
            return False
        for name, module in (("hypernet", self.hypernet), ("projector", self.projector)):
            module.load_state_dict(self._result_weights[name])
            module.save_pretrained(Path(directory) / name)
        self.save_run(directory)
        return True

    def save_run(self, directory: Path) -> None:
        """Write ``directory/run.json`` (:data:`~hynea_pl.methods.base.RUN_FILE`): which run of the case this is
        (``run``: its number, which its seed follows from; ``arguments``: :meth:`run_arguments`), its ``target`` and,
        for the record, its learning rates."""
        lr_min, lr_max = self.learning_rates
        run = {"run": int(self.run_number), "arguments": self.run_arguments(), "target": int(self.target[0]),
               "lr_min": lr_min, "lr_max": lr_max}
        (Path(directory) / RUN_FILE).write_text(json.dumps(run, indent=1) + "\n")

    def load_adapter(self, directory: Path) -> None:
        """Load a saved HyperNet and projector (:meth:`save_adapter`) into this case (after ``setup``)."""
        directory = Path(directory)
        self.hypernet = self.generator.load_hypernet(directory / "hypernet").to(self.origin_image.device)
        self.projector = ControlProjector.from_pretrained(directory / "projector").to(self.origin_image.device)
