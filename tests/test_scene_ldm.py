"""The digit scenes' unconditional LDM (zoo extras ``scene_autoencoder`` and ``scene_ldm``; issue 17), tiny profile,
built once into a temporary cache. The cross gates' scene SUTs (``detector_sut``, ``attribute_sut``) are replaced
by stubs here (their tiny builds are tested in their own modules); :func:`cross_scores` is tested on crafted
detections and logits."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from offline_guard import network_blocked
from tiny_families import perturb_zero_layers

from hynea_pl.generators.unconditional import UnconditionalLDM
from hynea_pl.zoo import registry
from hynea_pl.zoo.mnist.autoencoder import encode_latents, reconstruct
from hynea_pl.zoo.registry import build_component
from hynea_pl.zoo.scenes import ldm as sl

NAMES = ("scene_autoencoder", "scene_ldm")
PRESENT = 3  # the digit both stubs see in every scene


class StubDetector:
    """``YOLODetectorSUT``'s interface as the cross gates use it: one confident ``PRESENT`` per scene."""

    top_k = 5

    def candidate_logits(self, images: torch.Tensor) -> torch.Tensor:
        return torch.zeros(images.shape[0], 10, 7)

    def boxes(self, images: torch.Tensor) -> list[list[list[float]]]:
        rows = [[1.0, 2.0, 20.0, 30.0, float(PRESENT), 0.9], *[[0.0, 0.0, 4.0, 4.0, 7.0, 0.1]] * (self.top_k - 1)]
        return [rows for _ in range(images.shape[0])]


class StubAttributes(torch.nn.Module):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = torch.full((images.shape[0], 10), -4.0)
        logits[:, PRESENT] = 4.0
        return logits


def _patch(patch: pytest.MonkeyPatch, cache: Path) -> None:
    """Point the zoo at ``cache``; build ``scene_ldm`` without its ``gated_by`` SUTs, measured with the stubs."""
    patch.setenv("HYNEA_PL_CACHE", str(cache))
    patch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_component(dataclasses.replace(registry.get_component("scene_ldm"), gated_by=()))
    patch.setattr(sl, "load_cross_suts", lambda context: (StubDetector(), StubAttributes()))


@pytest.fixture(scope="module")
def scene_ldm_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache holding both tiny extras (and no MNIST demo zoo), built with the network blocked."""
    cache = tmp_path_factory.mktemp("scene_ldm_cache")
    with pytest.MonkeyPatch.context() as patch, network_blocked():
        _patch(patch, cache)
        for name in NAMES:
            build_component("tiny", name, verbose=False)
    yield cache


@pytest.fixture
def built(scene_ldm_cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """``name -> Built`` of both tiny extras, with the zoo pointing at their cache."""
    _patch(monkeypatch, scene_ldm_cache)
    return {name: build_component("tiny", name, verbose=False) for name in NAMES}


def scenes(n: int = 2) -> torch.Tensor:
    return torch.rand(n, 1, 64, 64, generator=torch.Generator().manual_seed(0))


def test_entries_have_the_ldm_pipeline_layout_and_their_gates(built, scene_ldm_cache):
    zoo_folders = {p.name.split("-")[0] for p in (scene_ldm_cache / "zoo").iterdir()}
    assert zoo_folders == {"scene_autoencoder", "scene_ldm", "tiny"}, zoo_folders  # no base zoo, no scene SUT
    autoencoder, ldm = built["scene_autoencoder"].entry, built["scene_ldm"].entry
    assert (autoencoder / "config.json").is_file() and (autoencoder / "training.json").is_file()
    assert all((ldm / sub).is_dir() for sub in sl.LDM_LAYOUT) and (ldm / "config.json").is_file()
    config = json.loads((ldm / "config.json").read_text())
    assert config["autoencoder"] == autoencoder.name and config["latent_shape"] == [3, 16, 16]
    assert config["training"] == json.loads(json.dumps(dataclasses.asdict(sl.LDM_CONFIGS["tiny"])))
    vq_config = json.loads((ldm / "vqvae" / "config.json").read_text())
    assert vq_config["scaling_factor"] == pytest.approx(config["scaling_factor"]) and config["scaling_factor"] > 0
    assert json.loads((autoencoder / "config.json").read_text())["scaling_factor"] == 1.0  # unscaled
    scheduler = json.loads((ldm / "scheduler" / "scheduler_config.json").read_text())
    assert scheduler["_class_name"] == "DDIMScheduler" and scheduler["timestep_spacing"] == "leading"
    assert scheduler["set_alpha_to_one"] is True and scheduler["beta_schedule"] == "squaredcos_cap_v2"

    gates = {name: {g["name"]: g for g in built[name].quality["gates"]} for name in NAMES}
    assert set(gates["scene_autoencoder"]) == {"recon_psnr", "recon_mse", "blank_psnr", "codebook_usage",
                                               "build_time_s"}
    assert set(gates["scene_ldm"]) == {"mean_intensity", "real_mean_intensity", "ink_fraction", "real_ink_fraction",
                                       "intensity_hist_l1", "detected_scene_rate", "attribute_agreement",
                                       "attribute_scene_rate", "real_detected_scene_rate", "real_attribute_agreement",
                                       "real_attribute_scene_rate", "build_time_s"}
    assert all(g["threshold"] is None for named in gates.values() for g in named.values())  # tiny: recorded only
    assert 0 < gates["scene_autoencoder"]["codebook_usage"]["value"] <= 1
    ldm_gates = gates["scene_ldm"]
    assert ldm_gates["detected_scene_rate"]["value"] == ldm_gates["attribute_agreement"]["value"] == 1.0  # stubs
    assert 0 <= ldm_gates["intensity_hist_l1"]["value"] <= 2
    assert (built["scene_ldm"].manifest / "samples.png").is_file()
    assert (built["scene_autoencoder"].manifest / "reconstructions.png").is_file()


def test_autoencoder_round_trips_scenes(built):
    vq = registry.get_component("scene_autoencoder").load(built["scene_autoencoder"].entry)
    assert not vq.training and not any(p.requires_grad for p in vq.parameters())
    assert encode_latents(vq, scenes()).shape == (2, 3, 16, 16)
    recon = reconstruct(vq, scenes())
    assert recon.shape == (2, 1, 64, 64) and 0 <= recon.min() and recon.max() <= 1


def test_unconditional_ldm_loads_the_zoo_entry_and_is_differentiable_for_hynea(built):
    from hynea_pl.paths import resolve_path

    entry = built["scene_ldm"].entry
    assert resolve_path("zoo://tiny/scene_ldm") == entry
    gen = UnconditionalLDM(pretrained="zoo://tiny/scene_ldm", num_inference_steps=2)
    assert gen.latent_shape == (3, 16, 16)
    assert gen.scaling_factor == pytest.approx(json.loads((entry / "config.json").read_text())["scaling_factor"])
    images = sl.generate_scenes(gen, 3, seed=0)
    assert images.shape == (3, 1, 64, 64) and 0 <= images.min() and images.max() <= 1
    # what HyNeA trains: the HyperNet (and the control) get gradients, the frozen LDM none
    hypernet = gen.make_hypernet()
    perturb_zero_layers(hypernet)
    control = torch.rand(1, *gen.latent_shape, requires_grad=True)
    image = gen(gen.initial_noise(0), hypernet=hypernet, control=control)
    assert image.shape == (1, 1, 64, 64)
    ((image - 0.5) ** 2).mean().backward()
    assert all(p.grad is None and not p.requires_grad for p in gen.parameters())
    assert all(p.grad is not None for p in hypernet.parameters())
    assert control.grad is not None and control.grad.abs().sum() > 0


def test_cross_scores_compare_detected_classes_with_present_attributes():
    def row(cls: int, conf: float) -> list[float]:
        return [0.0, 0.0, 10.0, 10.0, float(cls), conf]

    detections = [
        [row(3, 0.9), row(3, 0.7), row(5, 0.4)],  # {3}: the 5 is not confident
        [row(1, 0.6), row(7, 0.55)],  # {1, 7}
        [row(2, 0.5)],  # {}: confidence must exceed 0.5
        [],  # {}
    ]
    logits = torch.full((4, 10), -1.0)
    logits[0, 3] = 2.0  # {3}: agrees
    logits[1, 1] = 2.0  # {1}: misses the 7
    logits[3, 4] = 0.5  # {4}: nothing detected
    scores = sl.cross_scores(detections, logits)
    # agreement: the mean Jaccard index over the scenes with a detection (0: 1, 1: 1/2); scene 3's two empty sets
    # never "agree"
    assert scores == {"detected_scene_rate": 0.5, "attribute_agreement": 0.75, "attribute_scene_rate": 0.75}
    assert sl.cross_scores(detections, logits, min_confidence=0.45)["attribute_agreement"] == pytest.approx(1.5 / 3)
    blank = sl.cross_scores([[], []], torch.full((2, 10), -1.0))  # blank samples: nothing to agree on
    assert blank == {"detected_scene_rate": 0.0, "attribute_agreement": 0.0, "attribute_scene_rate": 0.0}
    with pytest.raises(ValueError, match="4 scenes"):
        sl.cross_scores(detections, logits[:3])


def test_scene_detections_see_every_candidate_and_restore_top_k():
    detector = StubDetector()
    rows = sl.scene_detections(detector, scenes(3), batch_size=2)
    assert len(rows) == 3 and all(len(r) == 7 for r in rows)  # all 7 candidates, not the top 5
    assert detector.top_k == 5


def test_ink_weight_makes_missed_strokes_cost_more_than_missed_background():
    from hynea_pl.zoo.mnist.autoencoder import AutoencoderTraining

    class Constant(torch.nn.Module):  # an "autoencoder" whose reconstruction is all black, whatever the input
        def encode(self, x):
            return type("Encoded", (), {"latent_dist": self})()

        def sample(self):
            return torch.zeros(1)

        def kl(self):
            return torch.zeros(1)

        def decode(self, z):
            return type("Decoded", (), {"sample": torch.full((1, 1, 4, 4), -1.0)})()

    stroke = torch.zeros(1, 1, 4, 4)
    stroke[..., 1, :] = 1.0  # one white row on black: a quarter of the pixels are ink
    losses = {}
    for weight in (0.0, 5.0):
        module = AutoencoderTraining(Constant(), lr=1e-3, max_steps=1, l1_weight=0.0, kl_weight=0.0, ink_weight=weight)
        module.log = lambda *args, **kwargs: None
        losses[weight] = module.training_step((stroke,), 0).item()
    # all-black misses the ink row by 2 (in [-1, 1]): MSE 4 / 4 = 1, with ink counted 6x: (6 * 4) / 4 = 6
    assert losses[0.0] == pytest.approx(1.0) and losses[5.0] == pytest.approx(6.0)


def test_make_unet_puts_attention_in_the_lowest_levels_only():
    cfg = dataclasses.replace(sl.LDM_CONFIGS["tiny"], attention_levels=2)
    unet = sl.make_unet(cfg, (3, 16, 16))
    assert unet.config.down_block_types == ("DownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D")
    assert unet.config.up_block_types == ("AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D")
    one = sl.make_unet(dataclasses.replace(cfg, attention_levels=1), (3, 16, 16))
    assert [type(b).__name__ for b in one.down_blocks] == ["DownBlock2D", "DownBlock2D", "AttnDownBlock2D"]
    assert unet(torch.zeros(2, 3, 16, 16), 10).sample.shape == (2, 3, 16, 16)
