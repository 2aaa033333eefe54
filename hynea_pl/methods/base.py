"""The protocol between the campaign and a test-generation method: one :class:`TestCaseModule` per test case.

The campaign's runner builds the module, fits it with a Trainer and writes its record from what the module returns
after the fit, :meth:`TestCaseModule.case_outcome` (a :class:`CaseOutcome`; no probing of a method's internals).
HyNeA and every baseline subclass it; a user's own method does too, and then runs under the same callbacks, budget
and record schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch

from hynea_pl.generators import Generator
from hynea_pl.suts import SUT, task_classes


@dataclass
class CaseResult:
    """What a test case keeps: the first image the method was searching for (``found``), else the one closest to it."""

    image: torch.Tensor | None = None  # (1, C, H, W) in [0, 1]
    output: torch.Tensor | None = None  # SUT output for ``image``
    behaviour_loss: float = float("inf")
    found: bool = False  # the method's own success criterion held for ``image`` (its early stop)
    step: int = 0  # 1-based step that produced ``image``
    history: list[dict] = field(default_factory=list)  # per-step numbers


#: The file in a saved adapter's folder (:meth:`TestCaseModule.save_adapter`) that says which run of its case saved
#: it: ``run`` (:attr:`TestCaseModule.run_number`), ``arguments`` (:meth:`TestCaseModule.run_arguments`) and the
#: run's ``target``, from which ``replay`` rebuilds that run; a folder without it holds the case's first run.
RUN_FILE = "run.json"


def _no_adapter(directory: Path) -> bool:
    return False


@dataclass
class CaseOutcome:
    """What a test case returns to the campaign once its fit ended (or failed): everything its record is written from.

    ``origin_image`` / ``origin_output`` / ``target`` are ``None`` when the case failed before its origin existed.
    ``diagnostics_error`` is an error raised while the method summarised its diagnostics: the record then keeps
    ``sut_evals`` and takes that error, as for any failure of the case."""

    sut_evals: int
    result: CaseResult
    stop_reason: str | None = None  # noted by the callbacks (hynea_pl.callbacks.stop), the same for every method
    diagnostics: dict[str, Any] = field(default_factory=dict)  # method-specific numbers for the record
    origin_image: torch.Tensor | None = None  # (1, C, H, W) in [0, 1]
    origin_output: torch.Tensor | None = None  # the SUT's output on the origin
    target: torch.Tensor | None = None  # (1,)
    save_adapter: Callable[[Path], bool] = _no_adapter  # saves what regenerates the result; False: nothing saved
    diagnostics_error: Exception | None = None

    @property
    def has_origin(self) -> bool:
        return self.origin_output is not None


class UnsupportedTaskError(ValueError):
    """A method was configured with a SUT task it does not implement."""


#: ``case module class -> the module that runs several of its cases together``, filled by :func:`batches`
BATCHED: dict[type, type[L.LightningModule]] = {}


def batches(case_class: type) -> Callable[[type[L.LightningModule]], type[L.LightningModule]]:
    """Class decorator: the decorated module runs several cases of ``case_class`` (and of its subclasses) together
    (:meth:`TestCaseModule.batched_module`). The batched module's file imports the case's, never the reverse."""
    def register(batched: type[L.LightningModule]) -> type[L.LightningModule]:
        BATCHED[case_class] = batched
        return batched

    return register


class TestCaseModule(L.LightningModule):
    """Base of every method's test case.

    A subclass takes ``generator``, ``sut``, ``origin_class`` and ``seed`` (set per case by the campaign), builds
    its origin with :func:`hynea_pl.methods.origin.register_origin` in ``setup`` (which sets ``condition``, what
    the generator conditions on, and registers the buffers ``noise``, ``origin_image``, ``origin_output``,
    ``target`` and ``objective``), counts ``sut_evals`` (images the
    SUT had not scored before in this case), keeps its :class:`CaseResult` in ``result`` and returns
    ``{"loss", "found"}`` from ``training_step``: ``found`` is what it searches for (HyNeA: the target reached;
    an untargeted search: the decision flipped), and ``FlipEarlyStopping`` stops there.
    """

    __test__ = False  # not a pytest test class

    #: Name written into records (``hynea``, ``giftbench-low-1e-4``, ...).
    method_name: str = "method"
    #: SUT tasks the method implements (the ``task`` of SUT classes, e.g. ``(ClassifierSUT.task,)``); the campaign
    #: refuses others before any case runs. ``None``: every task a SUT class defines.
    supported_tasks: ClassVar[tuple[str, ...] | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.sut_evals = 0
        self.result = CaseResult()
        self.stop_reason: str | None = None  # why the case ended, noted by the callbacks (hynea_pl.callbacks.stop)
        #: which run of its case this module is (0: the first), set by the case loop, which seeds run ``n`` with
        #: ``case.seed + n * ATTEMPT_SEED_STRIDE`` (:class:`hynea_pl.campaign.runner.CaseRun`)
        self.run_number = 0
        self._given_origin: torch.Tensor | None = None
        self._given_noise: torch.Tensor | None = None
        self._given_condition: Any = None

    # --- what the campaign asks of every method ------------------------------------------------------------
    generator: Generator
    sut: SUT

    # --- the case's coordinates, from the hyperparameters every method saves -----------------------------------
    @property
    def seed(self) -> int:
        return int(self.hparams.seed)

    @property
    def origin_class(self) -> int | None:
        return self.hparams.origin_class

    @property
    def target_class(self) -> int | None:
        return self.hparams.get("target")

    @classmethod
    def display_name(cls, init_args: dict[str, Any]) -> str:
        """The method name a module built with ``init_args`` will carry (before building it)."""
        return cls.method_name

    @classmethod
    def check_task(cls, task: str, name: str | None = None) -> None:
        """Raise :class:`UnsupportedTaskError` (one line) when the method does not implement ``task``."""
        supported = cls.supported_tasks if cls.supported_tasks is not None else tuple(task_classes())
        if task not in supported:
            raise UnsupportedTaskError(
                f"{name or cls.method_name} is implemented for {', '.join(supported)} SUTs, not {task!r}")

    @classmethod
    def batched_module(cls) -> type[L.LightningModule] | None:
        """The module that runs several cases of this method (or of the method it derives from) together
        (``cases.batch_size > 1``; registered by :func:`batches`), or ``None`` when the method runs one case per
        Trainer only."""
        return next((BATCHED[base] for base in cls.__mro__ if base in BATCHED), None)

    @property
    def evals_per_step(self) -> int:
        """At most how many SUT evaluations the next step spends (the budget never lets a step overrun)."""
        return 1

    @property
    def has_origin(self) -> bool:
        """Whether ``setup`` built the origin (a case that failed before has no origin fields)."""
        return getattr(self, "origin_output", None) is not None

    def provide_origin(self, image: torch.Tensor | None, noise: torch.Tensor | None = None,
                       condition: Any = None) -> None:
        """Use an origin image ``(1, C, H, W)`` already sampled by the campaign (so each origin is sampled once)
        and, for an origin inverted from a real image, its initial noise ``(1, *latent_shape)`` instead of the
        seed's; ``condition``: the generator condition the campaign drew for the case (a scene's layout; ``None``:
        :meth:`~hynea_pl.generators.Generator.case_condition` of the case's class and seed)."""
        self._given_origin = image
        self._given_noise = noise
        self._given_condition = condition

    def record_diagnostics(self) -> dict[str, Any]:
        """Method-specific numbers for the record's ``diagnostics``."""
        return {}

    def next_attempt(self) -> dict[str, Any] | None:
        """After a fit: the init arguments that change for another run of this case (the case loop builds it
        with them, within the case's budget), or ``None`` (the default: one run per case)."""
        return None

    def later_attempt(self) -> dict[str, Any] | None:
        """The init arguments of the run after this one, whatever this one finds (a batch may start it beside this
        one in a free slot: ``cases.spare_slots``), or ``None`` when this is the case's last run (the default)."""
        return None

    @classmethod
    def check_case_plan(cls, init_args: dict[str, Any], cases: Any) -> None:
        """Refuse in one line (``ValueError``), before any model is built, a case selection (``cases``, the config's
        section) that the method's own data (from its ``init_args``) cannot serve; the default has no data of its own.
        Called by :func:`hynea_pl.campaign.validation.check_plan`."""

    def run_arguments(self) -> dict[str, Any]:
        """The init arguments that built this run besides the case's own (those :meth:`next_attempt` or
        :meth:`later_attempt` gave the case loop): with :attr:`run_number`, what rebuilds this run (``replay``). The
        default ``{}``: every run of a case is built alike."""
        return {}

    def attempt_summary(self) -> dict[str, Any]:
        """What the record's ``diagnostics.attempts`` says of this run besides its evaluations, steps and stop."""
        return {}

    def case_outcome(self) -> CaseOutcome:
        """What the case hands to the campaign after its fit (also after a failed one): its counts, why it ended, its
        origin and result, :meth:`record_diagnostics` and :meth:`save_adapter`. A method overrides the parts it
        keeps elsewhere; HyNeA and the baselines inherit it."""
        has_origin = self.has_origin
        outcome = CaseOutcome(
            sut_evals=int(self.sut_evals), result=self.result, stop_reason=self.stop_reason,
            origin_image=self.origin_image if has_origin else None,
            origin_output=self.origin_output if has_origin else None,
            target=self.target if has_origin else None, save_adapter=self.save_adapter)
        try:
            outcome.diagnostics = self.record_diagnostics()
        except Exception as error:  # the record keeps the counts and takes the error (see CaseOutcome)
            outcome.diagnostics_error = error
        return outcome

    def save_adapter(self, directory: Path) -> bool:
        """Save what regenerates the result (HyNeA: HyperNet + projector) into ``directory``; ``False`` when the
        method has nothing to save or saving is off."""
        return False

    def load_adapter(self, directory: Path) -> None:
        """Load what :meth:`save_adapter` saved (after ``setup``), so :meth:`generate` gives the result again."""
        raise NotImplementedError(f"{self.method_name} saves no adapter to replay")

    def generate(self) -> torch.Tensor:
        """The image ``(1, C, H, W)`` the method's current state generates (HyNeA: the adapted chain)."""
        raise NotImplementedError(f"{self.method_name} has no single generated image to replay")
