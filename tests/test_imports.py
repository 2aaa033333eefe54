"""Every subpackage imports on its own, and no import cycle runs between hynea_pl's subpackages (issue 12)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hynea_pl"
MODULES = [
    "hynea_pl.paths", "hynea_pl.progress", "hynea_pl.zoo", "hynea_pl.generators", "hynea_pl.hypernets",
    "hynea_pl.suts", "hynea_pl.metrics", "hynea_pl.methods", "hynea_pl.campaign", "hynea_pl.callbacks",
    "hynea_pl.objectives", "hynea_pl.report", "hynea_pl.evaluation", "hynea_pl.baselines",
]


#: Imports each of MODULES with none of the package loaded (every ``hynea_pl`` module dropped from ``sys.modules``
#: first; the third-party libraries stay loaded, which are not under test): one JSON line, module -> traceback or null.
IMPORT_EACH = """
import importlib, json, sys, traceback
errors = {}
for module in sys.argv[1:]:
    for name in [n for n in sys.modules if n == "hynea_pl" or n.startswith("hynea_pl.")]:
        del sys.modules[name]
    try:
        importlib.import_module(module)
        errors[module] = None
    except BaseException:
        errors[module] = traceback.format_exc()[-3000:]
print(json.dumps(errors))
"""


@pytest.fixture(scope="module")
def import_errors() -> dict[str, str | None]:
    """Each module's import error in a fresh interpreter, the package imported anew for each module."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", IMPORT_EACH, *MODULES], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_with_none_of_the_package_loaded(module, import_errors):
    assert import_errors[module] is None, import_errors[module]


def node_of(path: Path) -> str:
    """The graph node of a source file: its top-level subpackage or module (``paths``), or ``hynea_pl`` itself."""
    parts = path.relative_to(PACKAGE).parts
    if parts == ("__init__.py",):
        return "hynea_pl"
    return parts[0].removesuffix(".py")


def import_targets(path: Path, package: str) -> list[str]:
    """The dotted names ``path`` (a module of ``package``) imports anywhere in its source, module level and inside
    functions alike, relative imports resolved; ``from a import b`` gives ``a.b`` (a module or a name in ``a``)."""
    targets: list[str] = []
    for stmt in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(stmt, ast.Import):
            targets += [alias.name for alias in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                anchor = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets += [f"{base}.{alias.name}" for alias in stmt.names]
    return targets


def imported_nodes(path: Path, nodes: set[str]) -> set[str]:
    """The nodes that ``path`` imports anywhere in its source (module level and inside functions alike)."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found: set[str] = set()
    for target in import_targets(path, package):
        parts = target.split(".")
        if parts[0] == "hynea_pl":
            found.add(parts[1] if len(parts) > 1 and parts[1] in nodes else "hynea_pl")
    return found


def import_graph() -> dict[str, set[str]]:
    files = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    nodes = {node_of(p) for p in files}
    graph: dict[str, set[str]] = {node: set() for node in nodes}
    for path in files:
        source = node_of(path)
        graph[source] |= imported_nodes(path, nodes) - {source}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a node list (first node repeated last), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"paths": {"zoo"}, "zoo": {"generators"}, "generators": {"paths"}, "report": {"zoo"}}
    assert find_cycle(graph) == ["generators", "paths", "zoo", "generators"]
    graph["paths"] = set()
    assert find_cycle(graph) is None


def test_graph_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    fake = tmp_path / "hynea_pl"
    (fake / "zoo").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "paths.py").write_text("def f():\n    from hynea_pl.zoo import build\n")
    (fake / "zoo" / "__init__.py").write_text("from . import build\nfrom ..paths import f\nimport hynea_pl\n")
    (fake / "zoo" / "build.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert import_graph() == {"hynea_pl": set(), "paths": {"zoo"}, "zoo": {"paths", "hynea_pl"}}


def module_import_graph(root: Path) -> dict[str, set[str]]:
    """``module -> the modules below root it imports`` over the package folder ``root`` (a package is its
    ``__init__``; module-level, function-level and type-checking imports alike; ``from package import name`` is an
    edge to the module that defines ``name`` when it is a module, else to the package)."""
    modules = {}
    for path in root.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for target in import_targets(path, package):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def test_no_import_cycle_between_modules():
    """No module of hynea_pl imports, through any chain, a module that imports it (issue 43): a concept that two
    modules need lives in a third, which both import."""
    graph = module_import_graph(PACKAGE)
    assert {"hynea_pl.campaign.runner", "hynea_pl.suts.base", "hynea_pl.methods.batched"} <= set(graph)
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_the_campaign_imports_nothing_of_the_report():
    """The report layer sits above the campaign: the campaign calls it through a hook (``run_campaign``'s
    ``on_records``, which the command line fills with the grids)."""
    graph = module_import_graph(PACKAGE)
    upward = {f"{module} -> {target}" for module, targets in graph.items() if module.startswith("hynea_pl.campaign")
              for target in targets if target.startswith("hynea_pl.report")}
    assert not upward, upward


def test_no_import_cycle_between_subpackages():
    graph = import_graph()
    assert "paths" in graph and "zoo" in graph
    assert graph["paths"] == set(), f"paths.py must import nothing of hynea_pl, it imports {graph['paths']}"
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_zoo_uri_still_resolves_through_the_registry(tiny_zoo):
    from hynea_pl.paths import registered_schemes, resolve_path

    assert "zoo" in registered_schemes()
    assert resolve_path("zoo://tiny/sut") == tiny_zoo.entries["sut"] / "model.safetensors"
    assert resolve_path("zoo://tiny/ldm") == tiny_zoo.entries["ldm"]
    assert resolve_path("~/x.pt") == Path.home() / "x.pt"


def test_register_scheme_routes_its_uris(monkeypatch):
    from hynea_pl import paths

    monkeypatch.setattr(paths, "_SCHEMES", dict(paths._SCHEMES))
    paths.register_scheme("mem", lambda uri: Path("/tmp") / uri.removeprefix("mem://"))
    assert paths.resolve_path("mem://a/b") == Path("/tmp/a/b")
    assert paths.resolve_path("other://a") == Path("other://a"), "unknown schemes stay local paths"
    with pytest.raises(ValueError):
        paths.register_scheme("bad://", str)


def test_task_names_are_spelled_only_in_the_suts_and_the_schema():
    """A task is one SUT class: no other module dispatches on a task's name."""
    from hynea_pl.suts.tasks import task_classes

    names = sorted(task_classes())
    assert {"multiclass", "binary", "detection"} <= set(names)
    allowed = {PACKAGE / "schema.py", *(PACKAGE / "suts").rglob("*.py")}
    found = [f"{path.relative_to(ROOT)}: {name!r}"
             for path in [*PACKAGE.rglob("*.py"), *(ROOT / "baselines").rglob("*.py")] if path not in allowed
             for node in ast.walk(ast.parse(path.read_text(), str(path)))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and (name := node.value) in names]
    assert not found, "task names outside hynea_pl/suts and the schema:\n" + "\n".join(found)
