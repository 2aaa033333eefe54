"""``hynea_pl.metrics`` is a pure library (as torchmetrics): Metric classes and their functional twins, importing
nothing of the zoo, the campaign, the report or the evaluation layer, reading no run folder and holding no
baseline's constants. Checked on the source of every module (imports at module level and inside functions)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METRICS = ROOT / "hynea_pl" / "metrics"
#: What a pure metric never imports: the layers above it, the callbacks and methods, and the readers of run folders
#: (PNG files, JSON lines).
FORBIDDEN = ("hynea_pl.zoo", "hynea_pl.campaign", "hynea_pl.report", "hynea_pl.evaluation", "hynea_pl.callbacks",
             "hynea_pl.methods", "hynea_pl.images", "hynea_pl.jsonl", "hynea_pl.baselines")
#: Names of the schema that read or write run folders.
RUN_FOLDER_NAMES = {"read_records", "write_records", "parse_record"}


def imports(path: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` of every import in ``path`` (``name`` None for ``import module``), relative ones resolved."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                module = ".".join([*anchor, module] if module else anchor)
            found += [(module, alias.name) for alias in node.names]
    return found


def forbidden(module: str, name: str | None) -> bool:
    full = f"{module}.{name}" if name and module == "hynea_pl" else module
    if any(full == f or full.startswith(f + ".") for f in FORBIDDEN):
        return True
    return module == "hynea_pl.schema" and name in RUN_FOLDER_NAMES


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path, monkeypatch):
    fake = tmp_path / "hynea_pl" / "metrics"
    fake.mkdir(parents=True)
    source = fake / "bad.py"
    source.write_text("def f():\n    from ..zoo import load_zoo\n    import hynea_pl.campaign.runner\n"
                      "from hynea_pl import report\nfrom hynea_pl.schema import Task, read_records\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = {pair for pair in imports(source) if forbidden(*pair)}
    assert found == {("hynea_pl.zoo", "load_zoo"), ("hynea_pl.campaign.runner", None), ("hynea_pl", "report"),
                     ("hynea_pl.schema", "read_records")}


def test_metrics_import_nothing_of_the_layers_above_them():
    modules = sorted(METRICS.rglob("*.py"))
    assert len(modules) > 10 and METRICS / "functional" / "validity.py" in modules
    bad = [f"{path.relative_to(ROOT)}: {module}{'.' + name if name else ''}"
           for path in modules for module, name in imports(path) if forbidden(module, name)]
    assert not bad, "hynea_pl.metrics must stay pure:\n" + "\n".join(bad)


def test_metrics_hold_no_baselines_constants():
    import hynea_pl.metrics
    import hynea_pl.metrics.functional as functional
    import hynea_pl.metrics.functional.search as search

    for module in (hynea_pl.metrics, functional, search):
        assert not [name for name in vars(module) if "PSI_SCHEDULE" in name], module.__name__
    from hynea_pl.baselines.truncation import ADAPTIVE_PSI_SCHEDULE, FIXED_PSI_SCHEDULE, SCHEDULES

    assert SCHEDULES == {"fixed": FIXED_PSI_SCHEDULE, "adaptive": ADAPTIVE_PSI_SCHEDULE}
    assert FIXED_PSI_SCHEDULE == (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
    assert ADAPTIVE_PSI_SCHEDULE == (1.0, 0.95, 0.90, 0.85, 0.80, 0.75, 0.70, 0.60, 0.50)
