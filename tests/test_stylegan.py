"""The zoo's style-based GAN: NVIDIA's interface, truncation toward the per-class centre, one training step, the
``stylegan`` zoo extra on the tiny profile (built on first use only) and its generator wrapper."""

from __future__ import annotations

import json

import pytest
import torch

from hynea_pl.zoo.stylegan import ProjectionDiscriminator, StyleGANTraining, StyleGenerator


def tiny_gan() -> StyleGenerator:
    torch.manual_seed(0)
    return StyleGenerator(z_dim=8, w_dim=16, channels=(16, 16, 8, 8), mapping_layers=2)


def test_nvidia_interface_shapes_and_labels_or_one_hot():
    G = tiny_gan().eval()
    assert G.num_ws == 8 and G.mapping.w_avg.shape == (10, 16)
    z = torch.randn(3, 8)
    ws = G.mapping(z, torch.tensor([1, 2, 3]))
    assert ws.shape == (3, 8, 16)
    assert torch.allclose(ws, G.mapping(z, torch.nn.functional.one_hot(torch.tensor([1, 2, 3]), 10).float()))
    with torch.no_grad():
        G.synthesis.convs[0].noise_strength.fill_(1.0)
    images = G.synthesis(ws, noise_mode="const")
    assert images.shape == (3, 1, 32, 32)
    assert torch.equal(images, G.synthesis(ws, noise_mode="const"))  # constant noise is deterministic
    assert not torch.equal(images, G.synthesis(ws, noise_mode="random"))
    with pytest.raises(ValueError, match="ws must be"):
        G.synthesis(ws[:, :5])


def test_truncation_moves_toward_the_class_centre():
    G = tiny_gan().eval()
    G.mapping.w_avg.copy_(torch.randn(10, 16))
    z, c = torch.randn(2, 8), torch.tensor([4, 9])
    full = G.mapping(z, c)
    half = G.mapping(z, c, truncation_psi=0.5)
    centre = G.mapping.w_avg[c][:, None]
    assert torch.allclose(half, centre + 0.5 * (full - centre), atol=1e-6)
    assert torch.allclose(G.mapping(z, c, truncation_psi=0.0), centre.expand_as(full), atol=1e-6)
    cut = G.mapping(z, c, truncation_psi=0.5, truncation_cutoff=3)
    assert torch.allclose(cut[:, 3:], full[:, 3:]) and torch.allclose(cut[:, :3], half[:, :3], atol=1e-6)


def test_one_training_step_updates_both_networks_and_tracks_w_avg():
    G = tiny_gan()
    D = ProjectionDiscriminator(channels=(8, 8, 16, 16))
    module = StyleGANTraining(G, D, r1_interval=1, aux_weight=1.0)
    opt_g, opt_d = module.configure_optimizers()
    module.optimizers = lambda: (opt_g, opt_d)
    module.manual_backward = lambda loss: loss.backward()
    logged = {}
    module.log_dict = lambda values, **_: logged.update(values)
    g_before = [p.clone() for p in G.parameters()]
    d_before = [p.clone() for p in D.parameters()]
    images, labels = torch.rand(8, 1, 32, 32), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    module.training_step((images, labels), 0)
    assert torch.isfinite(logged["d"]) and torch.isfinite(logged["g"])
    assert any(not torch.equal(a, b) for a, b in zip(g_before, G.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(d_before, D.parameters()))
    assert G.mapping.w_avg[:4].abs().sum() > 0 and G.mapping.w_avg[4:].abs().sum() == 0  # only seen classes
    assert torch.equal(module.g_ema.mapping.w_avg, G.mapping.w_avg)


def test_the_tiny_extra_builds_on_first_use_with_its_gates_and_plugs_into_the_wrapper(tmp_path, monkeypatch):
    from offline_guard import network_blocked
    from tiny_zoo import install

    from hynea_pl.generators.stylegan import StyleGANGenerator
    from hynea_pl.zoo import load_zoo
    from hynea_pl.zoo.cache import is_complete
    from hynea_pl.zoo.registry import build_component, component_paths

    install(tmp_path, ["zoo"])  # the fixed base zoo its gates use; the StyleGAN is trained here
    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))
    tiny_zoo = load_zoo("tiny")
    assert not component_paths("tiny", "stylegan")[0].exists()
    with network_blocked():
        built = build_component("tiny", "stylegan", verbose=False)
    assert is_complete(built.entry) and is_complete(built.manifest)
    names = [g["name"] for g in built.quality["gates"]]
    assert names == ["sut_accuracy_psi1", "sut_worst_class_accuracy_psi1", "oracle_judges_accuracy_psi1", "fid_psi1",
                     "diversity_psi1", "sut_accuracy_psi0.7", "sut_worst_class_accuracy_psi0.7",
                     "oracle_judges_accuracy_psi0.7", "fid_psi0.7", "build_time_s"]
    assert all(isinstance(g["value"], float) for g in built.quality["gates"])
    assert built.quality["gates"][4]["value"] > 0  # diversity: distinct z give distinct digits
    assert (built.manifest / "samples_psi0.7.png").is_file()
    assert json.loads((built.entry / "config.json").read_text())["output_range"] == [-1, 1]
    assert component_paths("tiny", "stylegan") == (built.entry, built.manifest)
    gen = StyleGANGenerator(pretrained="zoo://tiny/stylegan")
    z = gen.initial_noise(3)
    assert z.shape == (1, gen.z_dim) and torch.equal(z, gen.initial_noise(3))
    image = gen.sample(z, 5)
    assert image.shape == (1, 1, 32, 32) and 0 <= image.min() and image.max() <= 1
    assert torch.equal(image, tiny_zoo.extra("stylegan")(z, torch.tensor([5])).add(1).div(2).clamp(0, 1))


def test_within_class_spread_is_zero_for_a_collapsed_class_and_grows_with_variety():
    from hynea_pl.zoo.stylegan.component import within_class_spread

    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    collapsed = torch.zeros(6, 1, 4, 4)
    collapsed[3:] = 1.0
    assert within_class_spread(collapsed, labels) == 0.0
    varied = collapsed.clone()
    varied[0, 0, 0, 0] = 1.0  # one pixel differs in class 0: pairs (0, 1), (0, 2) at distance 1 of 6 ordered pairs
    assert within_class_spread(varied, labels) == pytest.approx((4 / 6) / 2)
