"""The zoo's compact class-conditional style-based GAN (a StyleGAN2-like design sized for 32x32 digits on a CPU).

Read top to bottom: equalised-lr layers, the mapping network (z + class -> w, a tracked ``w_avg``), the synthesis
network (a learned 4x4 constant, modulated / demodulated 3x3 convolutions with per-layer noise inputs, skip
``toRGB`` outputs, 4 -> 8 -> 16 -> 32), the generator with NVIDIA's interface, a projection discriminator, and the
training module (non-saturating logistic loss, lazy R1 on real images, style-mixing regularisation, an EMA copy of
the generator).

Interface (as in NVIDIA's StyleGAN2-ADA / StyleGAN3 generators, so that search methods treat both alike):

- ``G.mapping(z (B, z_dim), c (B, c_dim) one-hot or (B,) labels, truncation_psi=1.0, truncation_cutoff=None)``
  -> ``ws (B, num_ws, w_dim)``;
- ``G.synthesis(ws (B, num_ws, w_dim), noise_mode="const"|"random"|"none")`` -> images ``(B, 1, 32, 32)`` in
  [-1, 1];
- ``G.mapping.w_avg``: the tracked centre of W. Here it is per class, ``(c_dim, w_dim)`` (class-conditional
  truncation as in StyleGAN-XL); NVIDIA's StyleGAN2-ADA keeps one ``(w_dim,)`` centre. Consumers accept both.
- ``G.num_ws``, ``G.z_dim``, ``G.c_dim``, ``G.w_dim``, ``G.img_resolution``, ``G.img_channels``.

Omitted from StyleGAN2 for the CPU budget: path-length regularisation, ADA augmentation, FIR up/down-sampling
filters (bilinear interpolation and average pooling instead), and the fused modulated convolution (the input is
scaled by the style and the output by the demodulation coefficients, which is the same operation).
"""

from __future__ import annotations

import copy
import math

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

# --------------------------------------------------------------------------------------------------------------
# Equalised-learning-rate layers: weights ~ N(0, 1) scaled at run time by 1/sqrt(fan_in) (times lr_multiplier).


class EqualLinear(nn.Module):
    """``(B, in) -> (B, out)`` with run-time weight scaling; ``bias_init`` e.g. 1 for style affines."""

    def __init__(self, in_features: int, out_features: int, bias_init: float = 0.0, lr_multiplier: float = 1.0,
                 activation: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / lr_multiplier)
        self.bias = nn.Parameter(torch.full((out_features,), float(bias_init)))
        self.weight_gain = lr_multiplier / math.sqrt(in_features)
        self.bias_gain = lr_multiplier
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        x = F.linear(x, self.weight * self.weight_gain, self.bias * self.bias_gain)
        return F.leaky_relu(x, 0.2) * math.sqrt(2) if self.activation else x


class EqualConv2d(nn.Module):
    """A plain (unmodulated) conv with run-time weight scaling, ``(B, in, H, W) -> (B, out, H / stride, W / stride)``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, activation: bool = True,
                 stride: int = 1) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.weight_gain = 1 / math.sqrt(in_channels * kernel_size**2)
        self.padding, self.stride = kernel_size // 2, stride
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        x = F.conv2d(x, self.weight * self.weight_gain, self.bias, stride=self.stride, padding=self.padding)
        return F.leaky_relu(x, 0.2) * math.sqrt(2) if self.activation else x


def normalize_2nd_moment(x: Tensor, eps: float = 1e-8) -> Tensor:
    """Scale each row of ``(B, D)`` to unit root mean square."""
    return x * (x.square().mean(dim=1, keepdim=True) + eps).rsqrt()


def as_one_hot(c: Tensor, c_dim: int) -> Tensor:
    """Class labels ``(B,)`` (long) or one-hot / soft ``(B, c_dim)`` -> float ``(B, c_dim)``."""
    if c.dim() == 1:
        return F.one_hot(c.long(), c_dim).float()
    if c.dim() != 2 or c.shape[1] != c_dim:
        raise ValueError(f"class conditioning must be (B,) labels or (B, {c_dim}) one-hot, got {tuple(c.shape)}")
    return c.float()


# --------------------------------------------------------------------------------------------------------------
# Mapping network: z (B, z_dim) + class (B, c_dim) -> w broadcast to ws (B, num_ws, w_dim).


class MappingNetwork(nn.Module):
    """NVIDIA-style mapping: normalise z and the class embedding, concatenate, ``num_layers`` lrelu layers (lr
    multiplier 0.01), track the per-class centre ``w_avg (c_dim, w_dim)`` while training, truncate on request."""

    def __init__(self, z_dim: int, c_dim: int, w_dim: int, num_ws: int, num_layers: int = 4,
                 lr_multiplier: float = 0.01, w_avg_beta: float = 0.995) -> None:
        super().__init__()
        self.z_dim, self.c_dim, self.w_dim, self.num_ws = z_dim, c_dim, w_dim, num_ws
        self.w_avg_beta = w_avg_beta
        self.embed = EqualLinear(c_dim, w_dim)
        dims = [z_dim + w_dim] + [w_dim] * num_layers
        self.layers = nn.Sequential(*[EqualLinear(i, o, lr_multiplier=lr_multiplier, activation=True)
                                      for i, o in zip(dims[:-1], dims[1:])])
        self.register_buffer("w_avg", torch.zeros(c_dim, w_dim))

    def forward(self, z: Tensor, c: Tensor, truncation_psi: float = 1.0, truncation_cutoff: int | None = None,
                update_emas: bool = False) -> Tensor:
        onehot = as_one_hot(c, self.c_dim).to(z.device)
        x = torch.cat([normalize_2nd_moment(z), normalize_2nd_moment(self.embed(onehot))], dim=1)
        w = self.layers(x)
        if update_emas:  # per-class running mean of w over the classes in the batch
            with torch.no_grad():
                counts = onehot.sum(0)
                seen = counts > 0
                means = (onehot.t() @ w.detach()) / counts.clamp(min=1)[:, None]
                self.w_avg[seen] = torch.lerp(means[seen], self.w_avg[seen], self.w_avg_beta)
        ws = w[:, None, :].repeat(1, self.num_ws, 1)
        if truncation_psi != 1:
            centre = (onehot @ self.w_avg / onehot.sum(1, keepdim=True).clamp(min=1e-8))[:, None, :]
            cutoff = self.num_ws if truncation_cutoff is None else truncation_cutoff
            ws[:, :cutoff] = torch.lerp(centre, ws[:, :cutoff], truncation_psi)
        return ws


# --------------------------------------------------------------------------------------------------------------
# Synthesis network: modulated convolutions with noise inputs and skip toRGB outputs.


class ModulatedConv2d(nn.Module):
    """``x (B, in, H, W), w (B, w_dim) -> (B, out, H', W')``: the style ``s = A(w)`` scales the input channels,
    the (optional) demodulation rescales each output channel to unit expected variance; ``up`` doubles H, W
    (bilinear) first."""

    def __init__(self, in_channels: int, out_channels: int, w_dim: int, kernel_size: int = 3,
                 demodulate: bool = True, up: bool = False) -> None:
        super().__init__()
        self.affine = EqualLinear(w_dim, in_channels, bias_init=1.0)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.weight_gain = 1 / math.sqrt(in_channels * kernel_size**2)
        self.padding, self.demodulate, self.up = kernel_size // 2, demodulate, up

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        styles = self.affine(w)  # (B, in)
        weight = self.weight * self.weight_gain
        if self.up:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        x = F.conv2d(x * styles[:, :, None, None], weight, padding=self.padding)
        if self.demodulate:  # d[b, o] = 1 / sqrt(sum_{i,k} (w[o, i, k] * s[b, i])^2)
            d = (styles.square() @ weight.square().sum(dim=(2, 3)).t() + 1e-8).rsqrt()
            x = x * d[:, :, None, None]
        return x


class SynthesisLayer(nn.Module):
    """Modulated conv + per-pixel noise (learned strength) + bias + lrelu; one w per layer."""

    def __init__(self, in_channels: int, out_channels: int, w_dim: int, resolution: int, up: bool = False) -> None:
        super().__init__()
        self.conv = ModulatedConv2d(in_channels, out_channels, w_dim, up=up)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.noise_strength = nn.Parameter(torch.zeros(()))
        self.register_buffer("noise_const", torch.randn(resolution, resolution))
        self.resolution = resolution

    def forward(self, x: Tensor, w: Tensor, noise_mode: str = "random") -> Tensor:
        x = self.conv(x, w)
        if noise_mode == "random":
            x = x + torch.randn(x.shape[0], 1, self.resolution, self.resolution, device=x.device) * self.noise_strength
        elif noise_mode == "const":
            x = x + self.noise_const * self.noise_strength
        elif noise_mode != "none":
            raise ValueError(f"noise_mode must be 'random', 'const' or 'none', got {noise_mode!r}")
        return F.leaky_relu(x + self.bias[None, :, None, None], 0.2) * math.sqrt(2)


class ToRGB(nn.Module):
    """1x1 modulated conv without demodulation: features -> image channels."""

    def __init__(self, in_channels: int, img_channels: int, w_dim: int) -> None:
        super().__init__()
        self.conv = ModulatedConv2d(in_channels, img_channels, w_dim, kernel_size=1, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(img_channels))

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        return self.conv(x, w) + self.bias[None, :, None, None]


class SynthesisNetwork(nn.Module):
    """``ws (B, num_ws, w_dim) -> images (B, img_channels, R, R)`` in about [-1, 1].

    Resolutions 4, 8, ..., R with ``channels[i]`` features at the i-th; the 4x4 block has one conv, every other
    block an upsampling conv and a conv. Layer ``i`` of W+ drives conv ``i``; each block's toRGB shares the w of
    the next block's first conv (the last one uses the extra last w), so ``num_ws = number of convs + 1``
    (8 at 32x32, as in NVIDIA's networks).
    """

    def __init__(self, w_dim: int, img_resolution: int = 32, img_channels: int = 1,
                 channels: tuple[int, ...] = (128, 128, 64, 32)) -> None:
        super().__init__()
        resolutions = [4 * 2**i for i in range(len(channels))]
        if resolutions[-1] != img_resolution:
            raise ValueError(f"{len(channels)} channel entries give {resolutions[-1]} px, expected {img_resolution}")
        self.w_dim, self.img_resolution, self.img_channels = w_dim, img_resolution, img_channels
        self.const = nn.Parameter(torch.randn(channels[0], 4, 4))
        self.convs = nn.ModuleList([SynthesisLayer(channels[0], channels[0], w_dim, 4)])
        self.torgbs = nn.ModuleList([ToRGB(channels[0], img_channels, w_dim)])
        for previous, width, res in zip(channels[:-1], channels[1:], resolutions[1:]):
            self.convs.append(SynthesisLayer(previous, width, w_dim, res, up=True))
            self.convs.append(SynthesisLayer(width, width, w_dim, res))
            self.torgbs.append(ToRGB(width, img_channels, w_dim))
        self.num_ws = len(self.convs) + 1

    def forward(self, ws: Tensor, noise_mode: str = "const") -> Tensor:
        if ws.dim() != 3 or ws.shape[1:] != (self.num_ws, self.w_dim):
            raise ValueError(f"ws must be (B, {self.num_ws}, {self.w_dim}), got {tuple(ws.shape)}")
        x = self.const[None].expand(ws.shape[0], -1, -1, -1)
        x = self.convs[0](x, ws[:, 0], noise_mode)
        img = self.torgbs[0](x, ws[:, 1])
        for block in range(1, len(self.torgbs)):
            i = 2 * block - 1
            x = self.convs[i](x, ws[:, i], noise_mode)
            x = self.convs[i + 1](x, ws[:, i + 1], noise_mode)
            img = F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False)
            img = img + self.torgbs[block](x, ws[:, i + 2])
        return img


class StyleGenerator(nn.Module):
    """The generator: ``G(z, c, truncation_psi) = G.synthesis(G.mapping(z, c, truncation_psi))``, images in
    [-1, 1] ``(B, img_channels, R, R)``; see the module doc for the interface."""

    def __init__(self, z_dim: int = 64, w_dim: int = 128, c_dim: int = 10, img_resolution: int = 32,
                 img_channels: int = 1, channels: tuple[int, ...] = (128, 128, 64, 32),
                 mapping_layers: int = 4, mapping_lr_multiplier: float = 0.01) -> None:
        super().__init__()
        self.init_args = {"z_dim": z_dim, "w_dim": w_dim, "c_dim": c_dim, "img_resolution": img_resolution,
                          "img_channels": img_channels, "channels": list(channels), "mapping_layers": mapping_layers,
                          "mapping_lr_multiplier": mapping_lr_multiplier}
        self.z_dim, self.w_dim, self.c_dim = z_dim, w_dim, c_dim
        self.img_resolution, self.img_channels = img_resolution, img_channels
        self.synthesis = SynthesisNetwork(w_dim, img_resolution, img_channels, tuple(channels))
        self.num_ws = self.synthesis.num_ws
        self.mapping = MappingNetwork(z_dim, c_dim, w_dim, self.num_ws, mapping_layers, mapping_lr_multiplier)

    def forward(self, z: Tensor, c: Tensor, truncation_psi: float = 1.0, truncation_cutoff: int | None = None,
                noise_mode: str = "const") -> Tensor:
        return self.synthesis(self.mapping(z, c, truncation_psi, truncation_cutoff), noise_mode=noise_mode)


# --------------------------------------------------------------------------------------------------------------
# Discriminator: a conv pyramid, minibatch standard deviation, and a class projection (Miyato & Koyama 2018).


class ProjectionDiscriminator(nn.Module):
    """``images (B, C, R, R) in [-1, 1], c (B,) or (B, c_dim) -> logits (B,)``: ``psi(h) + <embed(c), h>``.

    A 1x1 ``fromRGB`` conv, then one stride-2 3x3 conv per halving (``channels[i]`` features after the i-th, a
    DCGAN-like pyramid that is cheap on a CPU), minibatch standard deviation, a dense feature layer ``h`` and the
    class projection.
    """

    def __init__(self, c_dim: int = 10, img_resolution: int = 32, img_channels: int = 1,
                 channels: tuple[int, ...] = (16, 32, 64, 128), feature_dim: int = 128) -> None:
        super().__init__()
        self.c_dim = c_dim
        self.classifier = EqualLinear(feature_dim, c_dim)  # auxiliary class logits (AC-GAN term), see classify()
        layers: list[nn.Module] = [EqualConv2d(img_channels, channels[0], 1)]
        for previous, width in zip(channels[:-1], channels[1:]):
            layers.append(EqualConv2d(previous, width, 3, stride=2))
        self.body = nn.Sequential(*layers)
        side = img_resolution // 2 ** (len(channels) - 1)
        self.fc = EqualLinear((channels[-1] + 1) * side * side, feature_dim, activation=True)
        self.out = EqualLinear(feature_dim, 1)
        self.embed = EqualLinear(c_dim, feature_dim)

    def forward(self, images: Tensor, c: Tensor, with_class_logits: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Logits ``(B,)``; with ``with_class_logits`` also the auxiliary class logits ``(B, c_dim)``."""
        x = self.body(images)
        group = min(4, x.shape[0])
        while x.shape[0] % group:
            group -= 1
        grouped = x.reshape(group, -1, *x.shape[1:])
        std = (grouped.var(dim=0, unbiased=False) + 1e-8).sqrt().mean(dim=(1, 2, 3))  # (B / group,); eps: no NaN grad at 0
        x = torch.cat([x, std.repeat(group)[:, None, None, None].expand(-1, 1, *x.shape[2:])], dim=1)
        h = self.fc(x.flatten(1))
        projection = (normalize_2nd_moment(self.embed(as_one_hot(c, self.c_dim).to(h.device))) * h).sum(1)
        logits = self.out(h).squeeze(1) + projection / math.sqrt(h.shape[1])
        return (logits, self.classifier(h)) if with_class_logits else logits


# --------------------------------------------------------------------------------------------------------------
# Training: non-saturating logistic loss, lazy R1, style mixing, EMA generator, per-class w_avg.


class StyleGANTraining(L.LightningModule):
    """GAN training on digit batches ``(images (B, 1, 32, 32) in [0, 1], labels (B,))`` with manual optimisation
    (one D step then one G step per batch); ``self.g_ema`` is the generator to keep.

    Losses: D = softplus(D(fake)) + softplus(-D(real)) (+ (r1_gamma / 2) |grad D(real)|^2 every ``r1_interval``
    steps, scaled by the interval); G = softplus(-D(fake)). With probability ``mixing_prob`` a fake uses two
    latents split at a random layer (style-mixing regularisation). EMA half-life ``ema_kimg`` thousand images.
    With ``aux_weight > 0`` the discriminator also learns the class of real digits (cross entropy on its auxiliary
    head) and the generator is pulled toward fakes it classifies as their condition (AC-GAN's term): the class
    signal is learned from the training digits only, never from the SUT.
    """

    def __init__(self, generator: StyleGenerator, discriminator: ProjectionDiscriminator, lr: float = 2e-3,
                 r1_gamma: float = 0.1, r1_interval: int = 4, mixing_prob: float = 0.5, ema_kimg: float = 5.0,
                 ema_rampup: float | None = 0.05, aux_weight: float = 0.0) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.G, self.D = generator, discriminator
        self.g_ema = copy.deepcopy(generator).eval().requires_grad_(False)
        self.lr, self.r1_gamma, self.r1_interval = lr, r1_gamma, r1_interval
        self.mixing_prob, self.ema_kimg, self.ema_rampup = mixing_prob, ema_kimg, ema_rampup
        self.aux_weight = aux_weight
        self.images_seen = 0

    def _fake(self, labels: Tensor, update_emas: bool = False) -> Tensor:
        b = labels.shape[0]
        z = torch.randn(b, self.G.z_dim, device=labels.device)
        ws = self.G.mapping(z, labels, update_emas=update_emas)
        if self.mixing_prob > 0 and torch.rand(()) < self.mixing_prob:
            cut = int(torch.randint(1, self.G.num_ws, ()))
            ws2 = self.G.mapping(torch.randn_like(z), labels)
            ws = torch.cat([ws[:, :cut], ws2[:, cut:]], dim=1)
        return self.G.synthesis(ws, noise_mode="random")

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        images, labels = batch
        real = images * 2 - 1
        opt_g, opt_d = self.optimizers()
        # discriminator
        with torch.no_grad():
            fake = self._fake(labels)
        do_r1 = self.r1_gamma > 0 and batch_idx % self.r1_interval == 0
        real.requires_grad_(do_r1)
        real_logits, real_classes = self.D(real, labels, with_class_logits=True)
        d_loss = F.softplus(self.D(fake, labels)).mean() + F.softplus(-real_logits).mean()
        if self.aux_weight > 0:
            d_loss = d_loss + self.aux_weight * F.cross_entropy(real_classes, labels)
        if do_r1:
            (grad,) = torch.autograd.grad(real_logits.sum(), real, create_graph=True)
            d_loss = d_loss + grad.square().sum(dim=(1, 2, 3)).mean() * (self.r1_gamma / 2) * self.r1_interval
        opt_d.zero_grad(set_to_none=True)
        self.manual_backward(d_loss)
        opt_d.step()
        # generator
        self.D.requires_grad_(False)
        fake_logits, fake_classes = self.D(self._fake(labels, update_emas=True), labels, with_class_logits=True)
        g_loss = F.softplus(-fake_logits).mean()
        if self.aux_weight > 0:
            g_loss = g_loss + self.aux_weight * F.cross_entropy(fake_classes, labels)
        opt_g.zero_grad(set_to_none=True)
        self.manual_backward(g_loss)
        opt_g.step()
        self.D.requires_grad_(True)
        self._update_ema(labels.shape[0])
        self.log_dict({"d": d_loss.detach(), "g": g_loss.detach()}, prog_bar=True)

    @torch.no_grad()
    def _update_ema(self, batch_size: int) -> None:
        self.images_seen += batch_size
        ema_nimg = self.ema_kimg * 1000
        if self.ema_rampup is not None:
            ema_nimg = min(ema_nimg, self.images_seen * self.ema_rampup)
        beta = 0.5 ** (batch_size / max(ema_nimg, 1e-8))
        for p_ema, p in zip(self.g_ema.parameters(), self.G.parameters()):
            p_ema.lerp_(p, 1 - beta)
        for b_ema, b in zip(self.g_ema.buffers(), self.G.buffers()):
            b_ema.copy_(b)

    def configure_optimizers(self):
        betas = (0.0, 0.99)
        r1_ratio = self.r1_interval / (self.r1_interval + 1)  # lazy-regularisation correction of D's Adam
        opt_g = torch.optim.Adam(self.G.parameters(), lr=self.lr, betas=betas, eps=1e-8)
        opt_d = torch.optim.Adam(self.D.parameters(), lr=self.lr * r1_ratio,
                                 betas=(0.0, 0.99**r1_ratio), eps=1e-8)
        return [opt_g, opt_d]
