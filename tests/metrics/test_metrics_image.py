"""SSIM / MS-SSIM / L2 / screening gate: hand values, scale selection, and agreement with independent
implementations (scikit-image, pytorch-msssim) on real images."""

import importlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hynea_pl.metrics import MultiScaleSSIM, ms_ssim, select_ms_ssim_config
from hynea_pl.metrics.functional import STANDARD_BETAS, l2_distance, multiscale_ssim, screening_gate, ssim

C1 = 0.01**2


def const(value, shape=(1, 1, 32, 32)):
    return torch.full(shape, value, dtype=torch.float64)


# ---------------------------------------------------------------- hand values
def test_ssim_of_constant_images_is_the_luminance_term():
    a, b = 0.5, 0.25
    lum = (2 * a * b + C1) / (a * a + b * b + C1)
    assert ssim(const(a), const(b)).item() == pytest.approx(lum, abs=1e-9)
    assert ssim(const(a), const(a)).item() == pytest.approx(1.0, abs=1e-9)
    # MS-SSIM: cs = 1 at every scale, the coarsest scale contributes lum ** beta_last
    value, config = multiscale_ssim(const(a), const(b), return_config=True)
    assert config.scales == 3
    assert value.item() == pytest.approx(lum ** config.betas[-1], abs=1e-9)
    big = multiscale_ssim(const(a, (1, 1, 256, 256)), const(b, (1, 1, 256, 256)))
    assert big.item() == pytest.approx(lum ** STANDARD_BETAS[-1], abs=1e-9)


def test_scale_selection():
    cfg32 = select_ms_ssim_config(32)
    assert (cfg32.scales, cfg32.betas, cfg32.kernel_size) == (3, (0.2856, 0.3001, 0.2363), 7)
    for size in (256, 512, 176):
        cfg = select_ms_ssim_config(size)
        assert (cfg.betas, cfg.kernel_size) == (STANDARD_BETAS, 11)
    assert select_ms_ssim_config(175).scales < 5
    assert select_ms_ssim_config(28).as_dict()["scales"] == 3  # raw MNIST still fits 3 scales of kernel 7
    assert select_ms_ssim_config(32, 256).scales == 3  # the smaller side decides
    with pytest.raises(ValueError):
        select_ms_ssim_config(2)
    with pytest.raises(ValueError, match="too small"):
        multiscale_ssim(const(0.5, (1, 1, 2, 2)), const(0.5, (1, 1, 2, 2)))


def test_ms_ssim_convenience_batch_of_one():
    x = torch.rand(1, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    y = (x + 0.05).clamp(0, 1)
    value = ms_ssim(y, x)
    assert value.dim() == 0 and 0.0 < value.item() < 1.0
    assert ms_ssim(x, x).item() == pytest.approx(1.0, abs=1e-5)
    # float32 input, no gradients needed, same as the explicit call
    assert value.item() == pytest.approx(multiscale_ssim(y, x, reduction="none")[0].item())


def test_l2_distance_modes_and_gate():
    zero, half = const(0.0, (1, 1, 4, 4)), const(0.5, (1, 1, 4, 4))
    assert l2_distance(zero, half).item() == pytest.approx(0.5)  # rms
    assert l2_distance(zero, half, mode="relative").item() == pytest.approx(1.0)
    assert l2_distance(zero, half, mode="sum").item() == pytest.approx(0.5 * 4)
    x = torch.rand(3, 1, 32, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert screening_gate(x, x).tolist() == [True, True, True]
    brighter = (x + 0.3).clamp(0, 1)
    assert not screening_gate(brighter, x).any()
    # thresholds are configurable
    assert screening_gate(brighter, x, ssim_min=0.0, l2_max=1.0).all()
    # the Mimicry rule demands a strictly positive distance and is far looser on L2
    assert not screening_gate(x, x, l2_mode="mimicry").any()
    slightly = (x + 0.001 * torch.randn(x.shape, generator=torch.Generator().manual_seed(2), dtype=x.dtype)).clamp(0, 1)
    assert screening_gate(slightly, x, l2_mode="mimicry").all()


def test_multiscale_ssim_metric_summarises_pairs_and_recorded_values():
    x = torch.rand(4, 1, 32, 32, generator=torch.Generator().manual_seed(3))
    y = (x * 0.9).clamp(0, 1)
    per_pair = multiscale_ssim(y, x, reduction="none").double()
    m = MultiScaleSSIM()
    m.update(y[:1], x[:1])
    m.update(y[1:], x[1:])
    stats = m.compute()
    assert stats["n"] == 4 and stats["mean"] == pytest.approx(per_pair.mean().item(), abs=1e-6)
    assert stats["median"] == pytest.approx(per_pair.quantile(0.5).item())
    # values computed before (a record's ms_ssim) join the pairs; None and NaN are left out
    other = MultiScaleSSIM()
    other.update(per_pair[:2].tolist())
    other.update(None)
    other.update(float("nan"))
    m.reset()
    m.update(y[2:], x[2:])
    m.merge_state(other)
    assert m.compute()["n"] == 4 and m.compute()["mean"] == pytest.approx(per_pair.mean().item(), abs=1e-6)


# ---------------------------------------------------------------- independent implementations
def _pytorch_msssim_reference(x, y, betas, win_size):
    """MS-SSIM assembled from pytorch-msssim's per-scale SSIM/CS (its ms_ssim refuses < 5 scales on small images)."""
    impl = importlib.import_module("pytorch_msssim.ssim")
    win = impl._fspecial_gauss_1d(win_size, 1.5).to(x.dtype).repeat([x.shape[1], 1, 1, 1])
    factors = []
    for i, beta in enumerate(betas):
        s, cs = impl._ssim(x, y, data_range=1.0, win=win, size_average=False)
        if i < len(betas) - 1:
            factors.append(torch.relu(cs) ** beta)
            x, y = F.avg_pool2d(x, 2), F.avg_pool2d(y, 2)
        else:
            factors.append(torch.relu(s) ** beta)
    return torch.stack(factors).prod(0).mean(1)


@pytest.mark.parametrize("kind", ["noise", "blur", "shift"])
def test_ms_ssim_matches_pytorch_msssim_on_photos(photos_256, perturb, kind):
    pytorch_msssim = pytest.importorskip("pytorch_msssim")
    for name, img in photos_256.items():
        other = perturb(img, kind, seed=len(name))
        ours, cfg = multiscale_ssim(other, img, reduction="none", return_config=True)
        assert cfg.scales == 5 and cfg.kernel_size == 11
        ref = pytorch_msssim.ms_ssim(other, img, data_range=1.0, size_average=False)
        assert torch.allclose(ours, ref, atol=1e-3), (name, ours, ref)


def test_ms_ssim_matches_reference_on_mnist(mnist_32, perturb):
    x = mnist_32
    # pair each digit with its neighbour (different digits) and with a perturbed copy of itself
    for other in (torch.roll(x, 1, dims=0), perturb(x, "noise"), perturb(x, "blur"), perturb(x, "shift")):
        ours, cfg = multiscale_ssim(other, x, reduction="none", return_config=True)
        ref = _pytorch_msssim_reference(other, x, cfg.betas, cfg.kernel_size)
        assert cfg.as_dict()["scales"] == 3
        assert torch.allclose(ours, ref, atol=1e-3), (ours, ref)


def test_ssim_matches_scikit_image(photos_256, mnist_32, perturb):
    metrics = pytest.importorskip("skimage.metrics")
    pytorch_msssim = pytest.importorskip("pytorch_msssim")

    def sk(a, b):
        a, b = a[0].permute(1, 2, 0).numpy(), b[0].permute(1, 2, 0).numpy()
        return metrics.structural_similarity(a, b, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                             use_sample_covariance=False, channel_axis=2)

    for name, img in photos_256.items():
        for kind in ("noise", "brightness"):
            other = perturb(img, kind)
            ours = ssim(other, img, reduction="none")
            ref = [sk(other[i : i + 1].double(), img[i : i + 1].double()) for i in range(img.shape[0])]
            assert ours.tolist() == pytest.approx(ref, abs=1e-3), (name, kind)
            assert torch.allclose(ours, pytorch_msssim.ssim(other, img, data_range=1.0, size_average=False), atol=1e-3)
    for i in range(4):
        a, b = mnist_32[i : i + 1], perturb(mnist_32[i : i + 1], "noise", seed=i)
        assert ssim(b, a).item() == pytest.approx(sk(b, a), abs=1e-3)
        assert ssim(b, a, kernel_size=7).item() == pytest.approx(
            pytorch_msssim.ssim(b, a, data_range=1.0, win_size=7).item(), abs=1e-3)


def test_float32_and_float64_agree(mnist_32, perturb):
    a = mnist_32[:4]
    b = perturb(a, "noise")
    assert torch.allclose(multiscale_ssim(b.float(), a.float(), reduction="none").double(),
                          multiscale_ssim(b, a, reduction="none"), atol=1e-5)
    assert not math.isnan(ms_ssim(torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32, 32)).item())
    assert np.isfinite(ms_ssim(torch.zeros(1, 1, 32, 32), torch.ones(1, 1, 32, 32)).item())
