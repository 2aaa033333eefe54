"""On-demand zoo extras: built on first use only, atomic entries keyed by config, gates in their own quality.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from hynea_pl.zoo import registry
from hynea_pl.zoo.cache import is_complete
from hynea_pl.zoo.quality import Gate, ZooQualityError


@dataclass(frozen=True)
class _Train:
    value: float = 1.0


@dataclass(frozen=True)
class _Gates:
    min_value: float | None = 0.5
    max_build_s: float | None = 60.0


def _register(monkeypatch, calls: list[str], gates: _Gates = _Gates()) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def train(cfg, context, out: Path) -> None:
        calls.append("train")
        torch.save({"value": cfg.value, "n_train": len(context.data.method.train_labels)}, out / "weights.pt")

    def measure(gate_cfg, entry: Path, context, out: Path) -> list[Gate]:
        calls.append("measure")
        value = torch.load(entry / "weights.pt")["value"]
        return [Gate("value", value, gate_cfg.min_value)]

    registry.register_component(registry.Component(
        name="dummy", train_configs={"tiny": _Train()}, gate_configs={"tiny": gates}, train=train,
        measure=measure, load=lambda entry: torch.load(entry / "weights.pt"), uri_target="weights.pt",
    ))
    from hynea_pl.zoo.released import discard

    discard(list(registry.component_paths("tiny", "dummy")))  # the shared tiny cache: each test starts clean


def test_extra_builds_once_on_first_use_with_its_own_gates(tiny_zoo, monkeypatch):
    calls: list[str] = []
    _register(monkeypatch, calls)
    entry, manifest = registry.component_paths("tiny", "dummy")
    assert not is_complete(entry) and not is_complete(manifest)
    assert tiny_zoo.extra("dummy")["value"] == 1.0
    assert calls == ["train", "measure"]
    quality = json.loads((manifest / "quality.json").read_text())
    assert [g["name"] for g in quality["gates"]] == ["value", "build_time_s"]
    assert quality["extra"] == "dummy" and quality["gates"][0]["passed"]
    # cached: nothing is trained or measured again, and zoo:// resolves to the entry's target
    from hynea_pl.paths import resolve_path

    assert resolve_path("zoo://tiny/dummy") == entry / "weights.pt"
    assert calls == ["train", "measure"]


def test_missed_gate_leaves_no_manifest_and_keeps_the_trained_entry(tiny_zoo, monkeypatch):
    calls: list[str] = []
    _register(monkeypatch, calls, _Gates(min_value=2.0))
    entry, manifest = registry.component_paths("tiny", "dummy")
    with pytest.raises(ZooQualityError, match="dummy") as missed:
        registry.build_component("tiny", "dummy", verbose=False)
    assert is_complete(entry) and not manifest.exists()
    assert not list(entry.parent.glob("*.partial-*"))
    assert "value 1 < 2" in str(missed.value) and "--rebuild dummy" in str(missed.value)  # says what to do


def test_weights_that_missed_their_gates_are_not_measured_again_until_trained_again(tiny_zoo, monkeypatch):
    calls: list[str] = []
    _register(monkeypatch, calls, _Gates(min_value=2.0))
    entry, manifest = registry.component_paths("tiny", "dummy")
    with pytest.raises(ZooQualityError) as first:
        registry.build_component("tiny", "dummy", verbose=False)
    for _ in range(2):  # later uses: the recorded line at once, nothing measured
        with pytest.raises(ZooQualityError, match="missed its quality gates: value 1 < 2") as again:
            registry.build_component("tiny", "dummy", verbose=False)
        assert str(again.value).startswith(str(first.value)) and "measured 20" in str(again.value)
    assert calls == ["train", "measure"]
    from hynea_pl.zoo.released import discard

    discard([entry, manifest])  # what --rebuild does: the record goes with the weights
    with pytest.raises(ZooQualityError):
        registry.build_component("tiny", "dummy", verbose=False)
    assert calls == ["train", "measure"] * 2


def test_released_gates_are_installed_only_with_the_released_weights(tmp_path, tiny_zoo, monkeypatch):
    from hynea_pl.zoo import released

    calls: list[str] = []
    _register(monkeypatch, calls)
    built = registry.build_component("tiny", "dummy", verbose=False)
    source = tmp_path / "released"
    released.release([built.entry, built.manifest], source)
    monkeypatch.setattr(released, "RELEASED", source)
    released.discard([built.entry, built.manifest])
    registry.build_component("tiny", "dummy", verbose=False)  # a fresh cache: installed, not trained
    assert calls == ["train", "measure"] and released.matches_released(built.entry)
    # weights trained here under the released name (a rebuild): the released gates do not vouch for them
    released.discard([built.manifest])
    torch.save({"value": 3.0}, built.entry / "weights.pt")
    assert not released.matches_released(built.entry)
    registry.build_component("tiny", "dummy", verbose=False)
    assert calls == ["train", "measure", "measure"]


def test_key_follows_the_train_config_and_unknown_names_fail(tiny_zoo, monkeypatch):
    _register(monkeypatch, [])
    entry, manifest = registry.component_paths("tiny", "dummy")
    changed = registry.Component(**{**registry.get_component("dummy").__dict__, "train_configs": {"tiny": _Train(2.0)}})
    registry.register_component(changed)
    entry2, manifest2 = registry.component_paths("tiny", "dummy")
    assert entry2 != entry and manifest2 != manifest
    with pytest.raises(ValueError, match="unknown zoo component 'nope'"):
        registry.get_component("nope")
    with pytest.raises(ValueError, match="no train config for profile 'full'"):
        registry.component_paths("full", "dummy")


def test_base_zoo_build_does_not_build_extras(tiny_zoo):
    from hynea_pl.zoo.labelled.zoo import COMPONENTS

    assert not set(registry.EXTRA_MODULES) & set(COMPONENTS)
    assert registry.extra_names() == sorted(registry.EXTRA_MODULES)
    assert set(tiny_zoo.entries) == set(COMPONENTS)


def test_an_extra_built_on_another_extra_builds_it_first_and_never_the_base_zoo(tmp_path, monkeypatch):
    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))  # an empty cache: no base zoo
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    calls: list[str] = []

    def train_base(cfg, context, out: Path) -> None:
        calls.append("train base")
        (out / "value.txt").write_text(str(cfg.value))

    def train_top(cfg, context, out: Path) -> None:
        calls.append("train top")
        base = float((context.deps["base"] / "value.txt").read_text())
        (out / "value.txt").write_text(str(base + cfg.value))

    def measure(gate_cfg, entry: Path, context, out: Path) -> list[Gate]:
        return [Gate("value", float((entry / "value.txt").read_text()), None)]

    common = dict(gate_configs={"tiny": _Gates()}, measure=measure, base_gated=False,
                  load=lambda entry: float((entry / "value.txt").read_text()))
    registry.register_component(registry.Component(name="base", train_configs={"tiny": _Train(1.0)},
                                                train=train_base, **common))
    registry.register_component(registry.Component(name="top", train_configs={"tiny": _Train(2.0)},
                                                train=train_top, depends=("base",), **common))
    assert registry.load_component("tiny", "top") == 3.0
    assert calls == ["train base", "train top"]
    zoo_folders = {p.name.split("-")[0] for p in (tmp_path / "zoo").iterdir()}
    assert zoo_folders == {"base", "top", "tiny"}, zoo_folders  # tiny-<extra>-<key>: the manifests; no sut/ldm/...
    # the dependency's training config is part of the dependant's key
    top_entry = registry.component_paths("tiny", "top")[0]
    changed = registry.Component(**{**registry.get_component("base").__dict__, "train_configs": {"tiny": _Train(5.0)}})
    registry.register_component(changed)
    assert registry.component_paths("tiny", "top")[0] != top_entry


def test_gated_by_builds_the_gating_extra_before_measuring_and_keys_only_the_gates(tmp_path, monkeypatch):
    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def train(cfg, context, out: Path) -> None:
        (out / "value.txt").write_text(str(cfg.value))

    def measure_scored(gate_cfg, entry: Path, context, out: Path) -> list[Gate]:
        judge = float((context.deps["judge"] / "value.txt").read_text())
        return [Gate("scored", judge * float((entry / "value.txt").read_text()), None)]

    plain = dict(gate_configs={"tiny": _Gates()}, base_gated=False, train=train,
                 load=lambda entry: float((entry / "value.txt").read_text()))
    registry.register_component(registry.Component(
        name="judge", train_configs={"tiny": _Train(3.0)}, measure=lambda *a: [], **plain))
    registry.register_component(registry.Component(
        name="scored", train_configs={"tiny": _Train(2.0)}, measure=measure_scored, gated_by=("judge",), **plain))
    entry, manifest = registry.component_paths("tiny", "scored")
    built = registry.build_component("tiny", "scored", verbose=False)
    assert built.quality["gates"][0]["value"] == 6.0
    changed = registry.Component(**{**registry.get_component("judge").__dict__, "train_configs": {"tiny": _Train(4.0)}})
    registry.register_component(changed)
    entry2, manifest2 = registry.component_paths("tiny", "scored")
    assert entry2 == entry and manifest2 != manifest  # the trained entry is kept; its gates are measured again
    assert registry.build_component("tiny", "scored", verbose=False).quality["gates"][0]["value"] == 8.0


def test_deleting_weights_that_missed_their_gates_brings_back_the_released_ones(tmp_path, tiny_zoo, monkeypatch):
    import shutil

    from hynea_pl.zoo import released
    from hynea_pl.zoo.cache import missed_record

    calls: list[str] = []
    _register(monkeypatch, calls)
    built = registry.build_component("tiny", "dummy", verbose=False)
    released.release([built.entry, built.manifest], tmp_path / "released")
    monkeypatch.setattr(released, "RELEASED", tmp_path / "released")
    released.discard([built.manifest])
    torch.save({"value": 0.0}, built.entry / "weights.pt")  # trained here under the released name: below its gate
    with pytest.raises(ZooQualityError, match=f"or delete {built.entry} to install the released weights"):
        registry.build_component("tiny", "dummy", verbose=False)
    assert missed_record(built.manifest).is_file()
    shutil.rmtree(built.entry)
    assert registry.build_component("tiny", "dummy", verbose=False).quality["gates"][0]["value"] == 1.0
    assert not missed_record(built.manifest).exists() and calls == ["train", "measure", "measure"]
