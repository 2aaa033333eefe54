"""Class-conditional patch-transformer latent diffusion (DiT): ``DiTTransformer2DModel`` + ``AutoencoderKL`` + DDIM.

Two classes:

- :class:`TransformerGenerator`: what every class-conditional patch transformer shares -- class labels with a null
  class for classifier-free guidance, one model call as *embed -> blocks (HyperNet residuals added before the
  first K) -> output head*, the learned-sigma split, and a :class:`~hynea_pl.hypernets.transformer_hypernet.
  TransformerHyperNet` copying the first K blocks.
- :class:`DiTGenerator`: diffusers' ``DiTTransformer2DModel`` (e.g. ``facebook/DiT-XL-2-256``), YAML-friendly, with
  the frozen components loaded once per process. Sampling matches ``diffusers.DiTPipeline`` exactly.

Extension point (SiT / REPA-E and other transformers diffusers does not ship): subclass
:class:`TransformerGenerator`, pass the denoiser, autoencoder, scheduler, the name of its block list, token width,
patch size, head count and null class to its constructor, and write three methods:

1. ``embed(latents, timestep, labels) -> (tokens (N, L, D), context)``: patchify + positions, and whatever the
   blocks take besides the tokens (SiT: ``c = t_embedder(t) + y_embedder(y)``);
2. ``run_block(block, tokens, context) -> tokens``: one block call (SiT: ``block(tokens, c)``); it is also how
   the HyperNet's copies are called, so keep it free of generator state (a ``staticmethod``);
3. ``head(tokens, context, size) -> (N, C_out, h, w)``: final layer and unpatchify.

Override ``guide`` as well when the model's guidance differs (e.g. REPA-E's guidance interval or guidance on the
first channels only), and ``latent_shape`` when the denoiser's config has no ``in_channels`` / ``sample_size``.

Residual injection: a thin forward of our own (:meth:`TransformerGenerator.model_output`) calls the frozen
transformer's submodules in order instead of registering forward pre-hooks on its blocks. The frozen components
are shared by every test case of a process (``lru_cache``); hooks would mutate that shared module and carry
per-call state through module attributes (fragile under checkpoint recomputation and across wrappers), whereas the
thin forward is stateless and hands the HyperNet the very tokens the frozen blocks see. What it duplicates of
diffusers' ``DiTTransformer2DModel.forward`` (output head, unpatchify) is pinned by a test against ``DiTPipeline``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import diffusers
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL, DiTTransformer2DModel
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt
from torch import Tensor, nn

from hynea_pl.generators.base import DiffusionGenerator
from hynea_pl.generators.hub import checkpoint_key, load_pretrained
from hynea_pl.hypernets.transformer_hypernet import TransformerHyperNet

ClassCondition = int | Tensor | None


class TransformerGenerator(DiffusionGenerator):
    """A frozen class-conditional patch-transformer LDM; HyperNet residuals enter before its first K blocks.

    Subclasses write :meth:`embed`, :meth:`run_block` and :meth:`head` (see the module docstring).

    Args:
        transformer: the denoiser (frozen).
        vae: the autoencoder.
        blocks: name of the denoiser's ``nn.ModuleList`` of transformer blocks.
        hidden_dim: token width ``D``.
        patch_size: the denoiser's patch size.
        num_heads: attention heads of the HyperNet's control attention (``D`` must divide by it).
        null_class: label of the unconditional (dropped) class; ``None``: no guidance.
        scheduler: a diffusers scheduler; default ``DDIMScheduler()``.
        hypernet_blocks: ``K``, how many blocks the HyperNet copies (capped at the depth).
        num_inference_steps, guidance_scale, eta: see :class:`~hynea_pl.generators.base.DiffusionGenerator`.
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`.
    """

    def __init__(
        self,
        transformer: nn.Module,
        vae: nn.Module,
        *,
        blocks: str,
        hidden_dim: int,
        patch_size: int,
        num_heads: int,
        null_class: int | None,
        scheduler: Any | None = None,
        hypernet_blocks: int = 8,
        num_inference_steps: PositiveInt = 50,
        guidance_scale: NonNegativeFloat = 4.0,
        eta: ClosedUnitInterval = 0.0,
        **memory: Any,
    ) -> None:
        super().__init__(transformer, vae, scheduler=scheduler, num_inference_steps=num_inference_steps,
                         guidance_scale=guidance_scale, eta=eta, **memory)
        if hypernet_blocks < 1:
            raise ValueError(f"hypernet_blocks must be >= 1, got {hypernet_blocks}")
        self.transformer = transformer
        self.blocks_name = blocks
        self.hidden_dim = hidden_dim
        self.patch_size = patch_size
        self.num_heads = num_heads
        self.null_class = null_class
        self.hypernet_blocks = hypernet_blocks
        self.requires_grad_(False)
        self.train(False)

    @property
    def denoiser(self) -> nn.Module:
        return self.transformer

    @property
    def frozen_blocks(self) -> nn.ModuleList:
        """The frozen transformer's blocks, in order."""
        return getattr(self.transformer, self.blocks_name)

    # ------------------------------------------------------------------ what a transformer family writes
    def embed(self, latents: Tensor, timestep: Tensor, labels: Tensor) -> tuple[Tensor, Any]:
        """``latents (N, C, h, w)``, ``timestep (N,)``, ``labels (N,)`` -> ``(tokens (N, L, D), context)``."""
        raise NotImplementedError

    @staticmethod
    def run_block(block: nn.Module, tokens: Tensor, context: Any) -> Tensor:
        """One transformer block: ``tokens (N, L, D)`` -> ``(N, L, D)``."""
        raise NotImplementedError

    def head(self, tokens: Tensor, context: Any, size: tuple[int, int]) -> Tensor:
        """Final layer + unpatchify: ``tokens (N, L, D)`` -> model output ``(N, C_out, h, w)``, ``size = (h, w)``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ conditions (class labels)
    def encode_condition(self, condition: ClassCondition, batch: int) -> tuple[Tensor, Tensor | None]:
        """Class index (``int``), ``LongTensor (B,)`` / ``(1,)`` or ``None`` -> ``(labels (B,), null (B,))``.

        ``None`` samples unconditionally (the null class, no guidance)."""
        device = self.device
        if condition is None:
            if self.null_class is None:
                raise ValueError("this transformer has no null class: pass a class label")
            return torch.full((batch,), self.null_class, dtype=torch.long, device=device), None
        if isinstance(condition, int):
            labels = torch.full((batch,), condition, dtype=torch.long, device=device)
        else:
            labels = self.expand_batch(torch.as_tensor(condition, device=device).long().reshape(-1), batch)
        null = None if self.null_class is None else torch.full_like(labels, self.null_class)
        return labels, null

    def combine_states(self, cond: Tensor, uncond: Tensor) -> Tensor:
        """Guided labels ``(2B,)``: conditional half first, then the null class (as ``DiTPipeline``)."""
        return torch.cat([cond, uncond])

    def guide(self, output: Tensor) -> Tensor:
        """``(2B, C, h, w)``, conditional half first -> ``uncond + scale * (cond - uncond)`` ``(B, C, h, w)``."""
        cond, uncond = output.chunk(2)
        return uncond + self.guidance_scale * (cond - uncond)

    # ------------------------------------------------------------------ one model call
    def model_output(self, model_input: Tensor, t: Tensor, states: Tensor, control: Tensor | None,
                     hypernet: TransformerHyperNet | None) -> Tensor:
        """Frozen transformer on ``model_input (N, C, h, w)`` with HyperNet residual ``i`` added to the hidden
        states before frozen block ``i``; returns the first ``C`` output channels (learned sigma dropped)."""
        n = model_input.shape[0]
        timestep = torch.as_tensor(t, device=model_input.device)
        timestep = timestep.reshape(-1).expand(n) if timestep.numel() == 1 else timestep
        tokens, context = self.embed(model_input, timestep, states)
        residuals = hypernet(tokens, context, control) if hypernet is not None else []
        for index, block in enumerate(self.frozen_blocks):
            if index < len(residuals):
                tokens = tokens + residuals[index]
            tokens = self.run_block(block, tokens, context)
        output = self.head(tokens, context, tuple(model_input.shape[-2:]))
        channels = model_input.shape[1]
        return output[:, :channels] if output.shape[1] == 2 * channels else output

    def make_hypernet(self) -> TransformerHyperNet:
        """A fresh, zero-initialised HyperNet copying the first ``hypernet_blocks`` blocks."""
        return TransformerHyperNet(
            self.frozen_blocks, hidden_dim=self.hidden_dim, latent_shape=self.latent_shape,
            patch_size=self.patch_size, num_heads=self.num_heads, run_block=self.run_block,
            num_blocks=self.hypernet_blocks,
        )

    def load_hypernet(self, directory: str | Path) -> TransformerHyperNet:
        """The HyperNet saved in ``directory``, rebuilt from this transformer's blocks (its saved block count
        wins over ``hypernet_blocks``)."""
        return TransformerHyperNet.from_pretrained(directory, self.frozen_blocks, run_block=self.run_block)


# ---------------------------------------------------------------------- loading
@lru_cache(maxsize=2)
def _load_frozen(pretrained: str, vae: str | None, dtype: str) -> tuple[DiTTransformer2DModel, AutoencoderKL, dict]:
    """Transformer, autoencoder and scheduler config, loaded once per process and shared by every test case."""
    torch_dtype = getattr(torch, dtype)
    transformer = load_pretrained(DiTTransformer2DModel, pretrained, subfolder="transformer", torch_dtype=torch_dtype)
    autoencoder = load_pretrained(AutoencoderKL, pretrained if vae is None else vae,
                                  subfolder="vae" if vae is None else None, torch_dtype=torch_dtype)
    scheduler_config = load_pretrained(diffusers.DDIMScheduler, pretrained, subfolder="scheduler").config
    for module in (transformer, autoencoder):
        module.requires_grad_(False).eval()
    return transformer, autoencoder, dict(scheduler_config)


def _scheduler(name: str, config: dict) -> Any:
    cls = getattr(diffusers, name, None)
    if cls is None or not hasattr(cls, "from_config"):
        raise ValueError(f"unknown diffusers scheduler {name!r}")
    return cls.from_config(config)


# ---------------------------------------------------------------------- DiT
class DiTGenerator(TransformerGenerator):
    """Frozen DiT (``DiTTransformer2DModel`` + ``AutoencoderKL`` + DDIM), sampled exactly as ``DiTPipeline``.

    Condition: an ImageNet class index (``None``: the null class, unconditional). Classifier-free guidance batches
    the class and the null class (label ``num_embeds_ada_norm``, the label embedding's dropped-class row), guides
    the first ``in_channels`` output channels (epsilon) and drops the learned-sigma channels; the timestep is
    broadcast to the batch.

    Args:
        pretrained: a local folder or a Hugging Face hub id in the ``facebook/DiT-XL-2-256`` layout
            (``transformer/``, ``vae/``, ``scheduler/``). Hub ids are read from the local Hugging Face cache first;
            a missing checkpoint is a one-line ``FileNotFoundError`` naming it.
        vae: another autoencoder (folder or hub id with the model at its root, e.g. ``stabilityai/sd-vae-ft-mse``);
            ``None``: ``<pretrained>/vae``.
        scheduler: diffusers scheduler class built from ``<pretrained>/scheduler`` (``DDIMScheduler``, as the DiT
            conversion ships; e.g. ``DPMSolverMultistepScheduler``).
        num_inference_steps: sampling steps.
        guidance_scale: classifier-free guidance scale (off at <= 1).
        eta: DDIM eta (0: deterministic).
        dtype: weights dtype (``float32``, ``bfloat16``, ``float16``).
        hypernet_blocks: ``K``, blocks copied by the HyperNet (8 as the authors' SiT HyperNet; capped at the depth).
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`
            (``gradient_checkpointing``, ``grad_steps``, ``autocast_dtype``, ``channels_last``).

    Other transformer denoisers: subclass :class:`TransformerGenerator` and write ``embed``, ``run_block`` and
    ``head`` (see this module's docstring); this class is the worked example.
    """

    def __init__(
        self,
        pretrained: str = "facebook/DiT-XL-2-256",
        vae: str | None = None,
        scheduler: str = "DDIMScheduler",
        num_inference_steps: PositiveInt = 50,
        guidance_scale: NonNegativeFloat = 4.0,
        eta: ClosedUnitInterval = 0.0,
        dtype: str = "float32",
        hypernet_blocks: int = 8,
        **memory: Any,
    ) -> None:
        transformer, autoencoder, config = _load_frozen(
            checkpoint_key(pretrained), None if vae is None else checkpoint_key(vae), dtype
        )
        self._setup(transformer, autoencoder, _scheduler(scheduler, config), hypernet_blocks=hypernet_blocks,
                    num_inference_steps=num_inference_steps, guidance_scale=guidance_scale, eta=eta,
                    **memory)

    @classmethod
    def from_components(cls, transformer: DiTTransformer2DModel, vae: AutoencoderKL, scheduler: Any | None = None,
                        **settings: Any) -> DiTGenerator:
        """A generator around in-memory components (tests, notebooks); ``settings`` as the constructor's."""
        generator = cls.__new__(cls)
        generator._setup(transformer, vae, scheduler, **settings)
        return generator

    def _setup(self, transformer: DiTTransformer2DModel, vae: AutoencoderKL, scheduler: Any | None,
               **settings: Any) -> None:
        label_embedding = transformer.transformer_blocks[0].norm1.emb.class_embedder
        TransformerGenerator.__init__(
            self, transformer, vae, blocks="transformer_blocks", hidden_dim=transformer.inner_dim,
            patch_size=transformer.config.patch_size, num_heads=transformer.config.num_attention_heads,
            null_class=label_embedding.num_classes if label_embedding.dropout_prob > 0 else None,
            scheduler=scheduler, **settings,
        )

    # ------------------------------------------------------------------ DiTTransformer2DModel, piece by piece
    def embed(self, latents: Tensor, timestep: Tensor, labels: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Patch embedding + fixed sin-cos positions; the context is ``(timestep, labels)`` (every DiT block embeds
        them itself in its adaLN-Zero norm)."""
        return self.transformer.pos_embed(latents), (timestep, labels)

    @staticmethod
    def run_block(block: nn.Module, tokens: Tensor, context: tuple[Tensor, Tensor]) -> Tensor:
        timestep, labels = context
        return block(tokens, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                     timestep=timestep, cross_attention_kwargs=None, class_labels=labels)

    def head(self, tokens: Tensor, context: tuple[Tensor, Tensor], size: tuple[int, int]) -> Tensor:
        """adaLN final layer (conditioned on the first block's timestep/class embedding) + unpatchify."""
        model = self.transformer
        timestep, labels = context
        conditioning = model.transformer_blocks[0].norm1.emb(timestep, labels, hidden_dtype=tokens.dtype)
        shift, scale = model.proj_out_1(F.silu(conditioning)).chunk(2, dim=1)
        hidden = model.norm_out(tokens) * (1 + scale[:, None]) + shift[:, None]
        hidden = model.proj_out_2(hidden)
        p, channels = model.config.patch_size, model.out_channels
        h, w = size[0] // p, size[1] // p
        hidden = hidden.reshape(-1, h, w, p, p, channels)
        return torch.einsum("nhwpqc->nchpwq", hidden).reshape(-1, channels, h * p, w * p)


__all__ = ["DiTGenerator", "TransformerGenerator"]
