"""A frozen style-based GAN as a test-input generator, for the search methods that work in its W / W+ space
(Mimicry, the truncation probes).

Any network with NVIDIA's StyleGAN2-ADA / StyleGAN3 / StyleGAN-XL interface plugs in:
``net.mapping(z (B, z_dim), c (B, c_dim) one-hot) -> ws (B, num_ws, w_dim)``, ``net.synthesis(ws, **kwargs) ->
images (B, C, R, R)``, ``net.mapping.w_avg`` (``(w_dim,)``, or ``(c_dim, w_dim)`` per class as in the zoo's GAN),
``net.num_ws``, ``net.z_dim``, ``net.c_dim``. Three ways to give it, in YAML:

- ``pretrained``: a folder with ``config.json`` (``class_path``, ``init_args``) and ``model.safetensors``, e.g.
  the zoo's ``zoo://full/stylegan``;
- ``network_pkl``: a local pickle (NVIDIA's ``network-snapshot-*.pkl``: a dict whose ``pickle_key`` entry, default
  ``G_ema``, is the generator; or a pickled module), with the directories of its code (``dnnlib``,
  ``torch_utils``) in ``code_path``. Unpickling runs code: load only files you trust;
- ``network``: ``class_path`` + ``init_args`` of any module with that interface, and optionally ``weights``, a
  local state-dict file (``.safetensors`` / ``.pt`` / ``.pth`` / ``.ckpt``).

The wrapper implements the common :class:`~hynea_pl.generators.protocol.Generator` surface directly
(``latent_shape = (z_dim,)``, ``initial_noise(seed) -> z (1, z_dim)``, ``sample(z, condition)`` at the configured
truncation); it has none of a diffusion model's optional points (no HyperNet to adapt, no autoencoder, no
guidance), so HyNeA, SINVAD and cfg-first-flip refuse it in one line. Its own interface (what the GAN methods call):
``mapping(z, condition) -> ws`` (untruncated), ``w_avg(condition, batch) -> (B, w_dim)``,
``truncate(ws, psi, condition, cutoff)`` (``w' = w_avg + psi * (w - w_avg)`` on the first ``cutoff`` layers),
``synthesis(ws) -> images (B, C, R, R) in [0, 1]``, ``styles(z, condition, psi)``.
"""

from __future__ import annotations

import json
import pickle
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import Tensor, nn

from hynea_pl.generators.protocol import Generator
from hynea_pl.paths import resolve_path


def _import_class(class_path: str) -> type:
    import importlib

    module, _, name = class_path.rpartition(".")
    if not module:
        raise ValueError(f"class_path {class_path!r} is not a dotted path (package.module.Class)")
    return getattr(importlib.import_module(module), name)


@lru_cache(maxsize=4)
def load_pretrained_folder(path: str) -> nn.Module:
    """A network from a folder with ``config.json`` (``class_path``, ``init_args``) and ``model.safetensors``;
    loaded once per process and shared (frozen)."""
    folder = Path(path)
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"style-based GAN folder {folder} needs config.json and model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    network = _import_class(config["class_path"])(**config.get("init_args", {}))
    network.load_state_dict(load_file(str(folder / "model.safetensors")))
    return network.eval().requires_grad_(False)


def load_network_pickle(path: str | Path, key: str = "G_ema", code_path: list[str] | None = None) -> nn.Module:
    """The generator in a pickle: ``data[key]`` of a dict (NVIDIA snapshots) or the pickled module itself. The
    ``code_path`` directories are put first on ``sys.path`` so that the pickle's classes import."""
    path = resolve_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"generator pickle {path} not found")
    for directory in reversed(code_path or []):
        directory = str(resolve_path(directory))
        if directory not in sys.path:
            sys.path.insert(0, directory)
    with open(path, "rb") as f:
        try:
            data = pickle.load(f)
        except ModuleNotFoundError as error:
            raise ModuleNotFoundError(f"{path}: {error}; put the generator's code directory in code_path") from None
    network = data[key] if isinstance(data, dict) else data
    if not isinstance(network, nn.Module):
        raise ValueError(f"{path}: entry {key!r} is a {type(network).__name__}, not a torch module")
    return network


def check_interface(network: nn.Module) -> None:
    """One-line error when ``network`` lacks NVIDIA's generator interface."""
    missing = [name for name in ("mapping", "synthesis", "num_ws", "z_dim", "c_dim") if not hasattr(network, name)]
    if not missing and not hasattr(network.mapping, "w_avg"):
        missing = ["mapping.w_avg"]
    if missing:
        raise TypeError(f"{type(network).__name__} lacks the style-based generator interface: "
                        f"{', '.join(missing)} (mapping, synthesis, mapping.w_avg, num_ws, z_dim, c_dim)")


class StyleGANGenerator(Generator):
    """A frozen style-based GAN (see the module doc for the three ways to load one).

    Args:
        pretrained: folder (or ``zoo://<profile>/stylegan``) with ``config.json`` + ``model.safetensors``.
        network_pkl: a local pickle holding the generator (NVIDIA snapshot or a pickled module).
        pickle_key: the entry of a pickled dict that is the generator.
        code_path: directories put on ``sys.path`` before unpickling (the generator's own code).
        network: any module with NVIDIA's interface (``class_path`` + ``init_args`` in YAML).
        weights: a state-dict file loaded into ``network``.
        truncation_psi: truncation of the origins (``sample``); 1.0 = none.
        truncation_cutoff: truncate only the first ``cutoff`` W+ layers (``None``: all).
        output_range: the range of the network's images, mapped to [0, 1] (NVIDIA: ``[-1, 1]``).
        synthesis_kwargs: passed to ``network.synthesis`` (default ``{"noise_mode": "const"}``: deterministic).
    """

    def __init__(
        self,
        pretrained: str | None = None,
        network_pkl: str | None = None,
        pickle_key: str = "G_ema",
        code_path: list[str] | None = None,
        network: nn.Module | None = None,
        weights: str | None = None,
        truncation_psi: float = 1.0,
        truncation_cutoff: int | None = None,
        output_range: tuple[float, float] = (-1.0, 1.0),
        synthesis_kwargs: dict[str, Any] | None = None,
    ) -> None:
        given = [name for name, value in (("pretrained", pretrained), ("network_pkl", network_pkl),
                                          ("network", network)) if value is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of pretrained, network_pkl, network (got {given or 'none'})")
        if network_pkl is not None:
            network = load_network_pickle(network_pkl, pickle_key, code_path)
        elif pretrained is not None:
            network = load_pretrained_folder(str(resolve_path(pretrained)))
        if weights is not None:
            from hynea_pl.checkpoints import read_state_dict

            path = resolve_path(weights)
            if not path.is_file():
                raise FileNotFoundError(f"generator weights {path} not found")
            network.load_state_dict(read_state_dict(path))
        check_interface(network)
        if not 0 < truncation_psi <= 1:
            raise ValueError(f"truncation_psi must be in (0, 1], got {truncation_psi}")
        super().__init__()
        self.network = network.eval().requires_grad_(False)
        self.truncation_psi, self.truncation_cutoff = truncation_psi, truncation_cutoff
        low, high = output_range
        if not high > low:
            raise ValueError(f"output_range must be (low, high) with high > low, got {output_range}")
        self.output_range = (float(low), float(high))
        self.synthesis_kwargs = {"noise_mode": "const"} if synthesis_kwargs is None else dict(synthesis_kwargs)

    # ------------------------------------------------------------------ the network's interface
    @property
    def device(self) -> torch.device:
        return next(self.network.parameters()).device

    @property
    def z_dim(self) -> int:
        return int(self.network.z_dim)

    @property
    def c_dim(self) -> int:
        return int(self.network.c_dim)

    @property
    def num_ws(self) -> int:
        return int(self.network.num_ws)

    @property
    def w_dim(self) -> int:
        return int(self.network.mapping.w_avg.shape[-1])

    @property
    def latent_shape(self) -> tuple[int, ...]:
        """``(z_dim,)``: :meth:`initial_noise` draws ``z (1, z_dim)`` from the seed on CPU."""
        return (self.z_dim,)

    def class_vector(self, condition: Any, batch: int) -> Tensor:
        """A class (int, ``(B,)`` labels or ``(B, c_dim)`` one-hot; ``None`` for an unconditional network) ->
        float ``(batch, c_dim)``."""
        if self.c_dim == 0:
            return torch.zeros(batch, 0, device=self.device)
        if condition is None:
            raise ValueError(f"this generator is class-conditional ({self.c_dim} classes): give a class")
        c = torch.as_tensor(condition, device=self.device)
        if c.dim() == 0:
            c = c.expand(batch)
        if c.dim() == 1:
            if int(c.min()) < 0 or int(c.max()) >= self.c_dim:
                raise ValueError(f"class {c.tolist()} outside [0, {self.c_dim})")
            c = F.one_hot(c.long(), self.c_dim)
        return self.expand_batch(c.float(), batch)

    @torch.no_grad()
    def mapping(self, z: Tensor, condition: Any = None) -> Tensor:
        """``z (B, z_dim)`` -> untruncated ``ws (B, num_ws, w_dim)``."""
        ws = self.network.mapping(z.to(self.device, torch.float32), self.class_vector(condition, z.shape[0]))
        return ws if ws.dim() == 3 else ws[:, None].repeat(1, self.num_ws, 1)

    @torch.no_grad()
    def w_avg(self, condition: Any = None, batch: int = 1) -> Tensor:
        """The truncation centre ``(batch, w_dim)``: the network's ``w_avg``, its class row when it keeps one per
        class (``(c_dim, w_dim)``)."""
        centre = self.network.mapping.w_avg.float()
        if centre.dim() == 2:
            return self.class_vector(condition, batch) @ centre
        return centre.expand(batch, -1)

    def truncate(self, ws: Tensor, psi: float, condition: Any = None, cutoff: int | None = None) -> Tensor:
        """``w' = w_avg + psi * (w - w_avg)`` on the first ``cutoff`` layers of ``ws (B, num_ws, w_dim)``."""
        if psi == 1:
            return ws
        centre = self.w_avg(condition, ws.shape[0])[:, None, :]
        cutoff = self.num_ws if cutoff is None else cutoff
        out = ws.clone()
        out[:, :cutoff] = centre + psi * (ws[:, :cutoff] - centre)
        return out

    @torch.no_grad()
    def synthesis(self, ws: Tensor) -> Tensor:
        """``ws (B, num_ws, w_dim)`` -> images ``(B, C, R, R)`` in [0, 1]."""
        images = self.network.synthesis(ws.to(self.device), **self.synthesis_kwargs).float()
        low, high = self.output_range
        return ((images - low) / (high - low)).clamp(0, 1)

    def styles(self, noise: Tensor, condition: Any = None, psi: float | None = None) -> Tensor:
        """``ws`` of ``noise`` for ``condition`` truncated at ``psi`` (default: the configured truncation)."""
        psi = self.truncation_psi if psi is None else psi
        return self.truncate(self.mapping(noise, condition), psi, condition, self.truncation_cutoff)

    # ------------------------------------------------------------------ the generator entry point
    @torch.no_grad()
    def sample(self, noise: Tensor, condition: Any = None) -> Tensor:
        """Images ``(B, C, R, R)`` in [0, 1] of ``noise = z (B, z_dim)`` for ``condition``, at the configured
        truncation."""
        return self.synthesis(self.styles(noise, condition))
