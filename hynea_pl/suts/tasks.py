"""Every task's SUT class by task name, with the built-in tasks loaded: ``multiclass``, ``binary``, ``detection``
(in that order), then any other task a loaded :class:`~hynea_pl.suts.base.SUT` subclass defines.

The SUT classes register themselves (:data:`~hynea_pl.suts.base.TASK_CLASSES`); this module imports them, so that
the base class never imports its subclasses.
"""

from __future__ import annotations

# each registers its task (the package imports the classifier first, so multiclass comes first)
import hynea_pl.suts.binary  # noqa: F401
import hynea_pl.suts.classifier  # noqa: F401
import hynea_pl.suts.detector  # noqa: F401  (ultralytics itself loads lazily)
from hynea_pl.suts import base
from hynea_pl.suts.base import SUT

__all__ = ["task_class", "task_classes"]


def task_classes() -> dict[str, type[SUT]]:
    """Every known task's SUT class, by task name."""
    return dict(base.TASK_CLASSES)


def task_class(task: str) -> type[SUT]:
    """The SUT class that owns ``task`` (e.g. a record's ``task``): its class methods read records of it."""
    classes = task_classes()
    if task not in classes:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(classes)}")
    return classes[task]
