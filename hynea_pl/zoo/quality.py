"""Quality gates of zoo components: a measured value against its threshold, the error a missed gate raises and the
table that shows them. What each component measures lives with it (e.g. :mod:`hynea_pl.zoo.labelled.gates`); the
registry (:mod:`hynea_pl.zoo.registry`) stores the gates beside the weights."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table


class ZooQualityError(RuntimeError):
    """A zoo build missed one of its model-quality gates."""


class ZooBuildError(RuntimeError):
    """Training a zoo component, or measuring its gates, failed: the component and the reason, in one line."""


@dataclass(frozen=True)
class Gate:
    """A measured value against its threshold; a missed ``fatal`` gate fails the build, a missed budget
    (``fatal=False``, e.g. the build time) is only reported."""

    name: str
    value: float
    threshold: float | None
    higher_is_better: bool = True
    fatal: bool = True

    @property
    def passed(self) -> bool:
        if self.threshold is None:
            return True
        return self.value >= self.threshold if self.higher_is_better else self.value <= self.threshold

    def as_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "threshold": self.threshold,
                "higher_is_better": self.higher_is_better, "passed": self.passed, "fatal": self.fatal}


def quality_table(profile: str, gates: list[dict]) -> Table:
    """A rich table of gate results (dicts as written to ``quality.json``); a missed budget reads ``over budget``."""
    table = Table(title=f"hynea_pl zoo quality ({profile})")
    for column in ("gate", "value", "threshold", "status"):
        table.add_column(column)
    for gate in gates:
        op = ">=" if gate["higher_is_better"] else "<="
        threshold = "-" if gate["threshold"] is None else f"{op} {gate['threshold']:g}"
        # quality.json written before budgets were reported lacks "fatal"; its only budget was the build time
        fatal = gate.get("fatal", gate["name"] != "build_time_s")
        if gate["threshold"] is None:
            status = "recorded"
        elif gate["passed"]:
            status = "[green]pass[/]"
        else:
            status = "[bold red]FAIL[/]" if fatal else "[yellow]over budget[/]"
        table.add_row(gate["name"], f"{gate['value']:.4g}", threshold, status)
    return table
