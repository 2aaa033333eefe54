"""The zoo's one registry (issue 27): base components and extras in one registry, built, gated and loaded by one
routine; the cache folders of every component unchanged by the move of the zoo's modules; entries that name the old
class paths still load; no import circle inside the zoo."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from test_imports import find_cycle, module_import_graph

from hynea_pl.zoo import registry
from hynea_pl.zoo.cache import MOVED_CLASSES, import_class
from hynea_pl.zoo.labelled.oracle import load_oracle
from hynea_pl.zoo.labelled.zoo import COMPONENTS

ZOO = Path(__file__).resolve().parents[1] / "hynea_pl" / "zoo"

#: The cache keys of every component: a base member's entry key (its manifest is the base zoo's), else ``(entry key,
#: manifest key)``. A change here invalidates cached entries: make it on purpose. (Last on purpose: the zoo trains on
#: all 70,000 MNIST digits in disjoint splits, so every entry is trained again; then the judges alone, which read like
#: people and answer "not a digit", with the k-NN judge gone: their keys, the base zoo's manifest (its members, vote
#: and gates) and the StyleGAN's manifest (gated against the base zoo) changed, nothing else.)
KNOWN_KEYS = {
    "full": {
        "attribute_oracle": ("ebca193649e7", "acfc8c291900"), "attribute_sut": ("252de41d0dc0", "912821388f91"),
        "autoencoder": "0d35664ad112", "detector_sut": ("6fe92278207e", "0a099d1be68e"), "embedder": "62028fa559d7",
        "judge-convmixer": "6c23b04b03df", "ldm": "cbc64efe48a2",
        "layout_scenes": ("f737fdc15823", "fc0148bbe63f"),
        "oracle-1": "f9c2b7c4c111", "oracle-2": "401410a8551a", "steer-cnn": "3a5e57b90bd7",
        "stylegan": ("7e1f0c819905", "60e7cbff10c5"), "sut": "87b57c080f28", "zoo": (None, "224466162e37"),
    },
    "tiny": {
        "attribute_oracle": ("0e79127d35f9", "eecaa73d70c1"), "attribute_sut": ("73fdd2aaafdd", "91f86b3fae5c"),
        "autoencoder": "023d4d872b16", "detector_sut": ("d4aa0b713d19", "e6c4eb3b918a"), "embedder": "81bc24f8c4da",
        "judge-convmixer": "b8178e60cc22", "ldm": "e37f4b3db81e",
        "layout_scenes": ("792060abcc30", "ce8a8f35d542"),
        "oracle-1": "883955473658", "oracle-2": "aa52b37d32d8", "steer-cnn": "2e78f9fd6aa2",
        "stylegan": ("9165be73d8ae", "5c44e4cd1c4f"), "sut": "6dcbc4005797", "zoo": (None, "2d27b6990f78"),
    },
}


def cache_keys(profile: str) -> dict:
    """:data:`KNOWN_KEYS`' form of the registry's cache folders for ``profile`` (checking the folder names' form)."""
    keys, base_manifest = {}, registry.component_paths(profile, registry.BASE_ZOO)[1]
    for name in [*registry.component_names(), registry.BASE_ZOO]:
        component = registry.get_component(name)
        entry, manifest = registry.component_paths(profile, name)
        entry_key = None if entry is None else entry.name.removeprefix(f"{name}-")
        if component.part_of:
            assert manifest == base_manifest, name
            keys[name] = entry_key
            continue
        prefix = f"{profile}-" if component.is_bundle else f"{profile}-{name}-"
        assert manifest.name.startswith(prefix), manifest
        keys[name] = (entry_key, manifest.name.removeprefix(prefix))
    return keys


@pytest.mark.parametrize("profile", sorted(KNOWN_KEYS))
def test_every_cache_folder_is_the_one_cached_before_the_move(profile):
    assert cache_keys(profile) == KNOWN_KEYS[profile]


def test_one_registry_holds_the_base_components_and_the_extras():
    names = registry.component_names()
    assert set(COMPONENTS) | set(registry.EXTRA_MODULES) == set(names)
    assert registry.BASE_ZOO not in names, "a bundle has no entry of its own"
    base = registry.get_component(registry.BASE_ZOO)
    assert base.is_bundle and base.depends == COMPONENTS and base.load is None
    for name in COMPONENTS:
        member = registry.get_component(name)
        assert member.part_of == registry.BASE_ZOO and not member.is_extra and member.load is not None, name
    assert all(registry.get_component(name).is_extra for name in registry.extra_names())
    with pytest.raises(ValueError, match="clashes with a base zoo component"):
        registry.register_component(dataclasses.replace(registry.get_component("stylegan"), name="sut"))
    with pytest.raises(ValueError, match="unknown zoo component 'nope'"):
        registry.get_component("nope")


def test_members_build_load_and_resolve_through_the_registry(tiny_zoo):
    built = registry.build_component("tiny", "sut", verbose=False)
    assert built.entry == tiny_zoo.entries["sut"] and built.manifest == tiny_zoo.manifest_dir
    assert built.entries == tiny_zoo.entries and built.quality == tiny_zoo.quality
    loaded, cached = registry.load_component("tiny", "sut").state_dict(), tiny_zoo.sut().state_dict()
    assert loaded.keys() == cached.keys() and all(torch.equal(loaded[k], cached[k]) for k in loaded)
    judge = tiny_zoo.entries["judge-convmixer"]
    assert registry.resolve_zoo_uri("zoo://tiny/judge-convmixer") == judge / "model.safetensors"
    with pytest.raises(ValueError, match="unknown zoo component"):  # the k-NN judge is gone
        registry.resolve_zoo_uri("zoo://tiny/judge-knn")
    assert registry.resolve_zoo_uri("zoo://tiny/autoencoder") == tiny_zoo.entries["autoencoder"]
    with pytest.raises(ValueError, match="unknown zoo component in 'zoo://tiny/zoo'"):
        registry.resolve_zoo_uri("zoo://tiny/zoo")
    with pytest.raises(ValueError, match="nothing to load"):
        registry.load_component("tiny", registry.BASE_ZOO)


@pytest.mark.parametrize("member", ["steer-cnn", "oracle-1"])
def test_an_entry_written_with_the_old_class_path_still_loads(tiny_zoo, tmp_path, member):
    entry = tmp_path / member
    shutil.copytree(tiny_zoo.entries[member], entry)
    config = json.loads((entry / "config.json").read_text())
    current = MOVED_CLASSES.get(config["class_path"], config["class_path"])
    old_paths = [old for old, new in MOVED_CLASSES.items() if new == current]
    assert len(old_paths) == 2  # before the zoo's modules were grouped, and under hynea_pl.zoo.mnist
    images = torch.rand(4, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    for old_path in old_paths:
        (entry / "config.json").write_text(json.dumps({**config, "class_path": old_path}))
        loaded = load_oracle(entry)
        torch.testing.assert_close(loaded(images), tiny_zoo.oracle(member)(images))
        assert loaded.not_a_class == tiny_zoo.oracle(member).not_a_class  # a judge keeps its "not a digit" output


def test_moved_classes_import_under_both_paths_and_no_old_module_is_left():
    for old, new in MOVED_CLASSES.items():
        assert import_class(old) is import_class(new), old
        assert importlib.util.find_spec(old.rpartition(".")[0]) is None, f"{old}: a shim module was left behind"


def test_no_import_circle_inside_the_zoo():
    graph = module_import_graph(ZOO)
    assert {"hynea_pl.zoo.registry", "hynea_pl.zoo.labelled.zoo", "hynea_pl.zoo.scenes.attributes"} <= set(graph)
    assert not graph["hynea_pl.zoo.registry"] & {m for m in graph if m.startswith(("hynea_pl.zoo.scenes",
                                                                                  "hynea_pl.zoo.stylegan"))}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"
