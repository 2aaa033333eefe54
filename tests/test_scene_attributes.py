"""The digit scenes' attribute SUT and oracle (zoo extras ``attribute_sut``, ``attribute_oracle``; issue 17), tiny
profile, built once into a temporary cache."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tiny_zoo import install

from hynea_pl.suts import BinaryAttributeSUT
from hynea_pl.zoo.labelled.oracle import OracleNet
from hynea_pl.zoo.registry import build_component, get_component
from hynea_pl.zoo.scenes import attributes as sa

NAMES = ("attribute_sut", "attribute_oracle")


@pytest.fixture(scope="module")
def scene_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache holding both fixed tiny extras (and nothing else: no MNIST demo zoo)."""
    cache = tmp_path_factory.mktemp("scene_attributes_cache")
    install(cache, NAMES)
    yield cache


@pytest.fixture
def built(scene_cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """``name -> Built`` of both tiny extras, with ``HYNEA_PL_CACHE`` pointing at their cache."""
    monkeypatch.setenv("HYNEA_PL_CACHE", str(scene_cache))
    return {name: build_component("tiny", name, verbose=False) for name in NAMES}


def scenes(n: int = 3) -> torch.Tensor:
    """Fake scenes ``(n, 1, 64, 64)`` in [0, 1]."""
    return torch.rand(n, 1, 64, 64, generator=torch.Generator().manual_seed(0))


def test_both_extras_build_load_and_give_ten_logits(built, scene_cache):
    from hynea_pl.paths import resolve_path

    zoo_folders = {p.name.split("-")[0] for p in (scene_cache / "zoo").iterdir()}
    assert zoo_folders == {"attribute_sut", "attribute_oracle", "tiny"}, zoo_folders  # no base zoo
    for name, entry in built.items():
        gates = {g["name"]: g for g in entry.quality["gates"]}
        assert set(gates) == {"mean_auroc", "mean_accuracy", "min_auroc", "exact_match", "build_time_s"}
        assert all(g["threshold"] is None for g in gates.values())  # tiny: recorded, never enforced
        assert 0.0 <= gates["mean_auroc"]["value"] <= 1.0 and 0.0 <= gates["mean_accuracy"]["value"] <= 1.0
        model = get_component(name).load(entry.entry)
        logits = model(scenes())
        assert logits.shape == (3, 10) and torch.isfinite(logits).all()
        assert not model.training and not any(p.requires_grad for p in model.parameters())
        assert model(scenes().expand(-1, 3, -1, -1)).shape == (3, 10)  # RGB is read as grey
        assert resolve_path(f"zoo://tiny/{name}") == entry.entry / "model.safetensors"
        config = json.loads((entry.entry / "config.json").read_text())
        assert config["preprocess"] == sa.SCENE_PREPROCESS and config["attribute_names"] == sa.ATTRIBUTE_NAMES


def test_the_attribute_sut_plugs_into_binary_attribute_sut_from_yaml(built):
    from jsonargparse import ArgumentParser

    from hynea_pl.suts import SUT

    init_args = json.loads((built["attribute_sut"].entry / "config.json").read_text())["init_args"]
    parser = ArgumentParser()
    parser.add_subclass_arguments(SUT, "sut")
    config = parser.parse_string(f"""
sut:
  class_path: hynea_pl.suts.BinaryAttributeSUT
  init_args:
    model:
      class_path: hynea_pl.zoo.scenes.attributes.SceneAttributeCNN
      init_args: {json.dumps(init_args)}
    weights: zoo://tiny/attribute_sut
    attribute: "3"
    attribute_names: {json.dumps(sa.ATTRIBUTE_NAMES)}
    preprocess: {json.dumps(sa.SCENE_PREPROCESS)}
""")
    sut = parser.instantiate(config).sut
    assert isinstance(sut, BinaryAttributeSUT) and sut.attribute == 3
    images = scenes(4)
    output = sut(images)
    torch.testing.assert_close(output, sa.load_attribute_sut(built["attribute_sut"].entry)(images))
    # flip semantics on its output: only the tested logit's sign counts
    origin = output[:1]
    flipped = origin.clone()
    flipped[0, 3] = -flipped[0, 3] if flipped[0, 3] != 0 else 1.0
    others = origin.clone()
    others[0, [k for k in range(10) if k != 3]] *= -1
    target = sut.default_target(origin)
    assert target.tolist() == [3]
    assert sut.is_flipped(torch.cat([origin, flipped, others]), origin, target).tolist() == [False, True, False]
    labels = sut.objective_labels(origin, target)
    assert labels[0, 3] == float(origin[0, 3] <= 0) and torch.equal(labels[0, :3], (origin[0, :3] > 0).float())


def test_sut_and_oracle_differ_in_architecture_and_weights(built):
    sut = sa.load_attribute_sut(built["attribute_sut"].entry)
    oracle = sa.load_attribute_oracle(built["attribute_oracle"].entry)
    assert isinstance(sut.network, sa.SceneAttributeCNN) and isinstance(oracle.network, OracleNet)
    assert set(sut.network.state_dict()) != set(oracle.network.state_dict())
    configs = {name: json.loads((entry.entry / "config.json").read_text()) for name, entry in built.items()}
    assert configs["attribute_sut"]["class_path"] == "hynea_pl.zoo.scenes.attributes.SceneAttributeCNN"
    assert configs["attribute_oracle"]["class_path"] == "hynea_pl.zoo.labelled.oracle.OracleNet"
    sut_training, oracle_training = configs["attribute_sut"]["training"], configs["attribute_oracle"]["training"]
    assert sut_training["seed"] != oracle_training["seed"]
    assert sut_training["scene_seed"] != oracle_training["scene_seed"]
    assert not torch.allclose(sut(scenes()), oracle(scenes()))
    # the oracle's augmentation is the stronger one (the MNIST oracle's, milder warps for a whole canvas)
    full = sa.ORACLE_CONFIGS["full"]
    assert full.max_rotation > 0 and full.stroke_prob > 0 and full.elastic_prob > 0 and full.noise_prob > 0
    assert sa.SUT_CONFIGS["full"].seed != full.seed


def test_a_missing_weights_file_is_a_one_line_error(tmp_path, built):
    with pytest.raises(FileNotFoundError) as error:
        BinaryAttributeSUT(sa.SceneAttributeCNN(), attribute=3, weights=str(tmp_path / "missing.safetensors"),
                           attribute_names=sa.ATTRIBUTE_NAMES)
    assert "missing.safetensors" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(FileNotFoundError) as error:
        sa.load_attribute_sut(tmp_path)
    assert str(tmp_path) in str(error.value) and "not found" in str(error.value) and "\n" not in str(error.value)


def test_scene_attribute_cnn_takes_any_size_and_scores_are_exact_on_perfect_logits():
    model = sa.SceneAttributeCNN(channels=(4, 8, 8), num_classes=10).eval()
    assert model(torch.zeros(2, 1, 64, 64)).shape == (2, 10)
    assert model(torch.zeros(2, 1, 48, 40)).shape == (2, 10)
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    scores = sa.attribute_scores(targets * 4 - 2, targets)
    assert scores == {"mean_auroc": 1.0, "min_auroc": 1.0, "mean_accuracy": 1.0, "exact_match": 1.0}
    scores = sa.attribute_scores(torch.tensor([[1.0, -1.0], [1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]]), targets)
    assert scores["mean_accuracy"] == pytest.approx(7 / 8) and scores["exact_match"] == pytest.approx(3 / 4)


def scene_oracle_models(oracle: dict | str) -> list[dict]:
    """The model sections of a scene config's ``oracle``: a path (relative to ``configs/``) or a section; the shared
    scene oracle's unanimous judges one by one."""
    import yaml

    if isinstance(oracle, str):
        oracle = yaml.safe_load((Path("configs") / oracle).read_text())
    model = oracle["init_args"]["model"]
    if model["class_path"] != "hynea_pl.suts.UnanimousPresence":
        return [model]
    return [judge["init_args"].get("model", judge) for judge in model["init_args"]["judges"]]


SCENE_CONFIGS = sorted(set(Path("configs").glob("scenes_*.yaml")) - {Path("configs/sections/scenes_oracle.yaml")})


@pytest.mark.parametrize("config", SCENE_CONFIGS, ids=lambda p: p.name)
def test_shipped_scene_configs_build_the_models_the_full_zoo_trains(config: Path):
    """A config's SUT / oracle architecture must match the full entries' weights (a mismatch fails at load)."""
    import yaml

    parsed = yaml.safe_load(config.read_text())
    expected = {"hynea_pl.zoo.scenes.attributes.SceneAttributeCNN": ("channels", sa.SUT_CONFIGS["full"]),
                "hynea_pl.zoo.labelled.oracle.OracleNet": ("widths", sa.ORACLE_CONFIGS["full"])}
    checked = []
    steering = ((parsed["model"]["init_args"].get("steering") or {}).get("model") or {}).get("init_args", {})
    models = [("sut", parsed["sut"]["init_args"].get("model")), ("model.steering.model", steering.get("model"))]
    models += [("oracle", model) for model in scene_oracle_models(parsed["oracle"])]
    for key, model in models:
        if isinstance(model, dict) and model["class_path"] in expected:
            field, cfg = expected[model["class_path"]]
            assert list(model["init_args"][field]) == list(getattr(cfg, field)), (config.name, key)
            assert model["init_args"]["dropout"] == cfg.dropout, (config.name, key)
            checked.append(key)
    assert "oracle" in checked and len(checked) >= (1 if "detection_giftbench" in config.name else 2), checked


def test_scene_configs_share_one_oracle_of_two_unanimous_judges():
    """Every scene config judges with configs/sections/scenes_oracle.yaml: the attribute oracle and the MNIST judges
    over
    windows, both of which must still see the digit."""
    import yaml

    for config in SCENE_CONFIGS:
        assert yaml.safe_load(config.read_text())["oracle"] == "sections/scenes_oracle.yaml", config.name
    judges = scene_oracle_models("sections/scenes_oracle.yaml")
    assert [judge["class_path"] for judge in judges] == ["hynea_pl.zoo.labelled.oracle.OracleNet",
                                                         "hynea_pl.suts.DigitWindowReader"]
    reader = judges[1]["init_args"]["reader"]
    assert reader == {"class_path": "hynea_pl.zoo.labelled.oracle_sut.ZooOracle",
                      "init_args": {"profile": "full", "role": "judges", "members": ["oracle-1", "oracle-2"]}}
