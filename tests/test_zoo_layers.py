"""The zoo's import graph runs one way: the shared machinery (registry, cache, profiles, splits, ...) knows no model,
the models of a labelled-image profile (``zoo/labelled``) know no data source or domain (``zoo/mnist``,
``zoo/folder``, ``zoo/scenes``, ``zoo/stylegan``), and every import, function-local ones included, is checked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ZOO = Path(__file__).parents[1] / "hynea_pl" / "zoo"
#: the layers, lowest first: a module may import its own layer and those below it
SOURCES = ("mnist", "folder", "scenes", "stylegan")


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) < 3:
        return 3  # the package itself: it registers every source
    return 1 if parts[2] == "labelled" else 2 if parts[2] in SOURCES else 0


def module_name(path: Path) -> str:
    parts = path.relative_to(ZOO.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, int]]:
    """``(imported module, line)`` of every import in ``path`` outside ``if TYPE_CHECKING:`` blocks;
    ``from hynea_pl.zoo import x`` names the submodule ``hynea_pl.zoo.x`` when there is one."""
    tree = ast.parse(path.read_text())
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and getattr(block.test, "id", None) == "TYPE_CHECKING" for node in ast.walk(block)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (ZOO.parents[1] / Path(*sub.split("."))).with_suffix(".py").is_file() or (
                    ZOO.parents[1] / Path(*sub.split("."))).is_dir()
                found.append((sub if is_module else node.module, node.lineno))
    return [(name, line) for name, line in found if name.startswith("hynea_pl.zoo")]


MODULES = sorted(ZOO.rglob("*.py"))


def test_the_graph_is_read():
    edges = {(module_name(path), name) for path in MODULES for name, _ in imports(path)}
    assert ("hynea_pl.zoo.mnist.profiles", "hynea_pl.zoo.labelled.config") in edges
    assert ("hynea_pl.zoo.labelled.oracle_sut", "hynea_pl.zoo.labelled.zoo") in edges  # a function-local import too


@pytest.mark.parametrize("path", [p for p in MODULES if "labelled" in p.parts], ids=lambda p: p.name)
def test_the_labelled_models_import_no_data_source(path):
    for name, line in imports(path):
        assert not any(name.startswith(f"hynea_pl.zoo.{source}") for source in SOURCES), (
            f"{path.name}:{line} imports {name}")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ZOO)))
def test_no_import_runs_up_a_layer(path):
    own = module_name(path)
    for name, line in imports(path):
        if name.startswith(own + "."):
            continue  # a package importing its own modules
        assert layer(name) <= layer(own), f"{own}:{line} (layer {layer(own)}) imports {name} (layer {layer(name)})"
