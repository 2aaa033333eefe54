"""The ``fit`` command's config: its schema, declared once (:func:`fit_parser`), parsed, and instantiated by the
same parser.

:func:`parse_config` parses a config (files, command-line options, or an already parsed namespace) into a
:class:`FitConfig`. :meth:`FitConfig.instantiate` then builds the frozen components once per process, and the
``model`` section becomes the factory of a case's module (jsonargparse instantiates a ``Callable`` that returns a
:class:`~hynea_pl.methods.TestCaseModule`: the method's class with its own arguments, nested components such as
HyNeA's steering model built once, waiting for the case's ``generator``, ``sut``, ``origin_class`` and ``seed``).
Each case's Trainer arguments (fresh callbacks and logger) come from the same parser
(:func:`build_trainer_args`). :meth:`hynea_pl.campaign.campaign.Campaign.from_config` builds the campaign from it.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import logging
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import lightning as L
from jsonargparse import ActionConfigFile, ArgumentError, Namespace
from jsonargparse.typing import import_object
from lightning.pytorch.cli import LightningArgumentParser

from hynea_pl.callbacks import SUTEvaluationBudget
from hynea_pl.campaign.case_types import CaseSelection
from hynea_pl.campaign.config_files import resolve_config_args
from hynea_pl.campaign.profile import apply_profile, stated_keys
from hynea_pl.errors import one_line
from hynea_pl.evaluation.stability import StabilityVariants
from hynea_pl.generators import Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import SUT
from hynea_pl.zoo.cache import current_class_path

#: Trainer defaults of a test case: no checkpoint of the frozen models, no logger unless configured.
TRAINER_DEFAULTS = {
    "max_steps": 100,
    "max_epochs": -1,
    "accelerator": "auto",
    "devices": 1,
    "logger": False,
    "enable_checkpointing": False,
    "enable_model_summary": False,
    "enable_progress_bar": False,
    "num_sanity_val_steps": 0,
    "log_every_n_steps": 1,
}

#: What the ``model`` section instantiates to: ``make(generator, sut, origin_class, seed, **overrides)`` builds one
#: case's fresh module. A method's constructor takes these four first (the :class:`TestCaseModule` protocol).
CaseModuleFactory = Callable[[Generator, SUT, int | None, int], TestCaseModule]


@dataclass
class RunOutput:
    """Where a campaign writes: ``root/name/`` (an existing folder is resumed, finished cases are kept).

    Args:
        root: parent folder of runs.
        name: run name (folder, W&B run-name prefix); ``{method}`` is replaced by the method name.
        method: method name written into every record; default: the model's ``method_name`` (``hynea``,
            ``giftbench-low-1e-4``, ``sinvad``, ...).
        resume: ``auto``: an existing folder is resumed only when its ``config.yaml`` matches this config (except
            the output, the logger and the case selection), else the run is refused naming the keys that differ;
            ``force``: resume it anyway and replace its ``config.yaml`` with this config.
    """

    root: str = "runs"
    name: str = "mnist_{method}"
    method: str | None = None
    resume: Literal["auto", "force"] = "auto"

    def resolved(self, method_name: str) -> RunOutput:
        """This output with ``method`` defaulted to the module's ``method_name`` and ``{method}`` in ``name``
        replaced."""
        method = self.method or method_name
        return RunOutput(self.root, self.name.replace("{method}", method), method, self.resume)


@lru_cache(maxsize=1)
def fit_parser() -> LightningArgumentParser:
    """The ``fit`` config's schema, the one place that declares it: every case of ``cases`` is one fit of a fresh
    ``model`` around the frozen ``generator`` and ``sut``, with a fresh Trainer from ``trainer``.

    ``model`` is any test-case LightningModule given as ``class_path`` + ``init_args`` whose constructor takes
    ``generator``, ``sut``, ``origin_class`` and ``seed`` first and that subclasses
    :class:`hynea_pl.methods.TestCaseModule`: ``hynea_pl.methods.HyNeACase``,
    ``hynea_pl.baselines.giftbench.GIFTbenchCase``, ``hynea_pl.baselines.sinvad.SINVADCase``, or a user's own method
    (docs/guide.md, "Your own method"). Adding an option to a section is an argument of that section's class."""
    parser = LightningArgumentParser(
        exit_on_error=False, prog="python -m hynea_pl fit",
        description="Generate failure-inducing test inputs: one fit per test case.")
    parser.add_argument("--config", action=ActionConfigFile, help="A config file (YAML); several are merged in order.")
    parser.add_argument("--seed_everything", type=int, default=0, help="The seed set before the components are built.")
    parser.add_argument("--profile", type=str | None, default=None,
                        help="A zoo profile (python -m hynea_pl zoo build --data DIR --name NAME): every '{profile}' "
                             "of the config becomes its name, and the profile's classifier and the cases take its "
                             "classes, channels and size (hynea_pl.campaign.profile).")
    parser.add_subclass_arguments(Generator, "generator", required=True,
                                  help="The frozen generator (class_path + init_args).")
    parser.add_subclass_arguments(SUT, "sut", required=True, help="The system under test (class_path + init_args).")
    parser.add_subclass_arguments(SUT, "oracle", required=False,
                                  help="The validity oracle: an independent judge of the same task as the SUT that "
                                       "gives every case its verdict (valid_failure, semantic_change, ambiguous, "
                                       "unaccepted, no_flip); it must never be the model that steers the search.")
    parser.add_subclass_arguments(TypicalityTest, "realism", required=False,
                                  help="The realism test of the verdict: a result the judges read as the origin's "
                                       "class that fails it is 'degraded', not a valid failure "
                                       "(hynea_pl.zoo.labelled.realism.ZooTypicality on the MNIST zoo).")
    parser.add_argument("--model", type=CaseModuleFactory, required=True,
                        help="The method: a TestCaseModule's class_path + init_args (one fresh module per case).")
    parser.add_class_arguments(StabilityVariants, "stability",
                               help="The stability verdict: the semantics-preserving variants of a flipped result "
                                    "the SUT is asked about again (never seen by a method).")
    parser.add_class_arguments(CaseSelection, "cases")
    parser.add_class_arguments(RunOutput, "output")
    parser.add_class_arguments(SUTEvaluationBudget, "budget", instantiate=False)
    parser.add_lightning_class_args(L.Trainer, "trainer")
    parser.set_defaults({f"trainer.{key}": value for key, value in TRAINER_DEFAULTS.items()})
    return parser


@dataclass
class FitConfig:
    """A parsed ``fit`` config (``config``, a jsonargparse namespace) and the parser that parsed it."""

    parser: LightningArgumentParser
    config: Namespace

    def dump(self) -> str:
        """The config as YAML, as the run's ``config.yaml`` keeps it."""
        return self.parser.dump(self.config, skip_none=False)

    def instantiate(self) -> Namespace:
        """Every section built by the parser but the ``trainer`` (built per case, :func:`build_trainer_args`):
        ``generator``, ``sut``, ``oracle``, ``realism`` (modules), ``model`` (the case factory, its nested
        components built once), ``cases`` / ``stability`` / ``output`` (their dataclasses)."""
        config = self.config.clone()
        del config["trainer"]
        return self.parser.instantiate(config)


def parse_config(args: list[str] | Namespace | dict) -> FitConfig:
    """Parse ``fit``'s options (``["--config", "CONFIG.yaml", "--section.option", "VALUE", ...]``) or a parsed
    namespace (or its dict) against the schema; a wrong key or value raises one error naming it, with the closest
    valid key where there is one. Seeds ``seed_everything``."""
    parser = fit_parser()
    try:
        if isinstance(args, list):
            config = parser.parse_args(_group_models_off(resolve_config_args(args)))
        else:
            config = parser.parse_object(args.as_dict() if isinstance(args, Namespace) else args)
    except ArgumentError as error:
        raise ArgumentError(None, f"{one_line(error)}{closest_option_hint(str(error))}"
                                  f"{included_file_hint(str(error))}") from None
    apply_profile(config, stated_keys(args) if isinstance(args, list) else None)
    L.seed_everything(config.seed_everything, verbose=False)
    return FitConfig(parser, config)


def build_trainer_args(trainer: Namespace) -> dict[str, Any]:
    """A ``trainer`` section's Trainer arguments with fresh callbacks and logger, built now by the schema's parser
    (one case's)."""
    return dict(vars(fit_parser().instantiate(Namespace(trainer=trainer)).trainer))


#: Option groups of a method whose field holds a model (HyNeA's ``steering.model``, ``acceptance.test``): a model field
#: inside a group's dataclass cannot be set to ``null`` on its own on the command line (jsonargparse validates the string
#: against the model's class), so ``--model.init_args.steering.model null`` is passed as the group's mapping.
GROUP_MODELS = {"steering": "model", "acceptance": "test"}


def _group_models_off(args: list[str]) -> list[str]:
    """``args`` with ``--model.init_args.<group>.<model field> null`` (or ``=null``) written as
    ``--model.init_args.<group> {<field>: null}``, which sets that field alone."""
    out: list[str] = []
    items = iter(range(len(args)))
    for i in items:
        flag, value = args[i], None
        if "=" in flag and flag.startswith("--"):
            flag, value = flag.split("=", 1)
        elif i + 1 < len(args):
            value = args[i + 1]
        match = re.fullmatch(r"--model\.init_args\.(\w+)\.(\w+)", flag)
        if match and GROUP_MODELS.get(match.group(1)) == match.group(2) and value in ("null", "None"):
            out += [f"--model.init_args.{match.group(1)}", f"{{{match.group(2)}: null}}"]
            if "=" not in args[i]:
                next(items, None)
            continue
        out.append(args[i])
    return out


def included_file_hint(message: str) -> str:
    """What to do when a config's ``config:`` key names a file that is not there: the path is relative to the
    config's own folder (``configs/mnist.yaml`` reads ``configs/sections/hynea.yaml``), so a copy elsewhere needs it
    beside it."""
    if 'Parser key "config": File does not exist' not in message:
        return ""
    return ("; a config's 'config:' names a file relative to the config's own folder (configs/mnist.yaml reads "
            "configs/sections/hynea.yaml): copy configs/sections/ beside your copy, or keep configs/mnist.yaml and "
            "layer your changes with a second --config")


def closest_option_hint(message: str) -> str:
    """``"; did you mean 'lr_max'?"`` for an unknown key in a jsonargparse message (an option a class does not
    accept, an unrecognized ``--section.option``), from the class's parameters or the schema's keys; ``""`` when
    nothing is close; for a class path that moved (:func:`~hynea_pl.zoo.cache.current_class_path`), where it is now."""
    moved = [(old, new) for old in dict.fromkeys(re.findall(r"'([A-Za-z_][\w.]*\.[A-Z]\w*)'", message))
             if (new := current_class_path(old)) != old]
    if moved:
        return "".join(f"; {old} is now {new}" for old, new in moved)
    option = re.search(r"Option '([\w.]+)' is not accepted", message)
    class_path = re.search(r"class_path[ =]'([\w.]+)'", message)
    if option and class_path:
        try:
            candidates = _option_names(import_object(class_path.group(1)))
        except Exception:  # noqa: BLE001 - a hint is optional
            return ""
        unknown = option.group(1)
        by_field = {name.rsplit(".", 1)[-1]: name for name in candidates if "." in name}
        close = difflib.get_close_matches(unknown, [*candidates, *by_field], n=1, cutoff=0.6)
        return f"; did you mean {by_field.get(close[0], close[0])!r}?" if close else ""
    else:
        plain = option or re.search(r"unrecognized arguments: --([\w.]+)", message)
        if not plain:
            return ""
        unknown = plain.group(1)
        candidates = [action.dest for action in fit_parser()._actions if action.dest.count(".") == unknown.count(".")]
    close = difflib.get_close_matches(unknown, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _option_names(cls: type) -> list[str]:
    """A class's init arguments and, for an argument that is an option group (a dataclass, e.g. HyNeA's ``search``),
    its fields as ``group.field``."""
    names = []
    hints = typing.get_type_hints(cls.__init__)
    for name in inspect.signature(cls).parameters:
        names.append(name)
        for kind in typing.get_args(hints.get(name)) or (hints.get(name),):
            if dataclasses.is_dataclass(kind):
                names += [f"{name}.{field.name}" for field in dataclasses.fields(kind)]
    return names


def quiet_lightning_info() -> None:
    """A campaign fits many Trainers: keep Lightning's per-fit info lines (seed, devices, tips) out of the way."""
    for name in ("lightning.fabric.utilities.seed", "lightning.pytorch.utilities.rank_zero",
                 "lightning.fabric.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.WARNING)


__all__ = ["TRAINER_DEFAULTS", "CaseModuleFactory", "FitConfig", "RunOutput", "build_trainer_args", "fit_parser",
           "parse_config", "quiet_lightning_info"]
