"""HyperNet for a patch transformer denoiser (DiT, SiT, ...): trainable copies of its first blocks, zero outputs.

The design follows the authors' HyperNet for REPA-E SiT-XL: a deep copy of the first K transformer blocks, a
zero-initialised linear after each copied block whose output is added to the hidden states *before* the matching
frozen block, and a latent-shaped control that enters the copy through an attention layer (the tokens attend to the
patch-embedded control) followed by a zero-initialised linear. A fresh HyperNet therefore adds exactly zero.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from diffusers.models.embeddings import PatchEmbed
from torch import Tensor, nn

from hynea_pl.hypernets.control import expand_control
from hynea_pl.hypernets.pretrained import PretrainedHyperNetMixin

#: ``run_block(block, tokens (N, L, D), context) -> tokens (N, L, D)``: how one transformer block is called.
BlockRunner = Callable[[nn.Module, Tensor, Any], Tensor]


def zero_linear(dim: int) -> nn.Linear:
    """A ``dim -> dim`` linear layer with zero weight and bias."""
    layer = nn.Linear(dim, dim)
    nn.init.zeros_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class TransformerHyperNet(PretrainedHyperNetMixin, nn.Module):
    """Trainable copy of the first ``num_blocks`` blocks of a frozen transformer, with zero-initialised outputs.

    Forward: ``tokens (N, L, D)`` (the patch tokens the frozen blocks see), the blocks' ``context`` (DiT: timestep
    and class labels; passed through unchanged to ``run_block``) and ``control (B, C, h, w)`` -> ``K`` residuals
    ``(N, L, D)``, residual ``i`` to be added to the hidden states before frozen block ``i``.

    Control path: ``control`` is patch-embedded (a fresh ``PatchEmbed``: conv with the denoiser's patch size plus
    fixed sin-cos positions) to tokens ``(N, L_c, D)``; the input tokens attend to them (``nn.MultiheadAttention``,
    queries layer-normalised) and the attention output goes through a zero-initialised linear before it is added
    to the copy's input tokens.

    The copied blocks stay in eval mode whatever ``train()`` asks (DiT's label embedding drops class labels at
    random in training mode, and the copy must see the same condition as the frozen blocks).

    Args:
        blocks: the frozen transformer's blocks (they are deep-copied, not modified).
        hidden_dim: token width ``D``.
        latent_shape: ``(C, h, w)`` of the control (the denoiser's latent shape).
        patch_size: patch size of the control embedding (the denoiser's patch size).
        num_heads: heads of the control attention.
        run_block: calls one block on ``(tokens, context)``.
        num_blocks: ``K``, capped at ``len(blocks)``.

    Saving: ``save_pretrained(directory)`` writes the settings (not ``run_block``) and all weights;
    ``from_pretrained(directory, blocks, run_block)`` rebuilds the copy from the frozen blocks and loads them.
    """

    def __init__(
        self,
        blocks: Sequence[nn.Module],
        hidden_dim: int,
        latent_shape: Sequence[int],
        patch_size: int,
        num_heads: int,
        run_block: BlockRunner,
        num_blocks: int = 8,
    ) -> None:
        super().__init__()
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        count = min(num_blocks, len(blocks))
        param = next(blocks[0].parameters())
        self.blocks = nn.ModuleList(copy.deepcopy(blocks[i]) for i in range(count))
        self.zero_layers = nn.ModuleList(zero_linear(hidden_dim) for _ in range(count))
        c, h, w = (int(s) for s in latent_shape)
        self.latent_shape = (c, h, w)
        self.hidden_dim, self.patch_size, self.num_heads = hidden_dim, patch_size, num_heads
        self.control_embed = PatchEmbed(height=h, width=w, patch_size=patch_size, in_channels=c,
                                        embed_dim=hidden_dim)
        self.control_norm = nn.LayerNorm(hidden_dim)
        self.control_attention = nn.MultiheadAttention(hidden_dim, num_heads, batch_first=True)
        self.control_zero = zero_linear(hidden_dim)
        self.run_block = run_block
        self.to(device=param.device, dtype=param.dtype)
        self.requires_grad_(True)
        self.blocks.train(False)

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def hypernet_config(self) -> dict[str, Any]:
        return {"hidden_dim": self.hidden_dim, "latent_shape": list(self.latent_shape), "patch_size": self.patch_size,
                "num_heads": self.num_heads, "num_blocks": self.num_blocks}

    @classmethod
    def from_pretrained(cls, directory: str | Path, blocks: Sequence[nn.Module],
                        run_block: BlockRunner) -> TransformerHyperNet:
        """A fresh copy of the frozen ``blocks`` with the weights saved in ``directory`` (strict)."""
        return cls(blocks, run_block=run_block, **cls.read_config(directory)).load_pretrained_weights(directory)

    def train(self, mode: bool = True) -> TransformerHyperNet:
        """Trainable, but the copied blocks stay deterministic (eval mode: no label or token dropout)."""
        super().train(mode)
        self.blocks.train(False)
        return self

    def embed_control(self, tokens: Tensor, control: Tensor) -> Tensor:
        """``tokens (N, L, D)`` + zero-linear(attention of the tokens over the embedded ``control``)."""
        keys = self.control_embed(expand_control(control, tokens.shape[0], tokens.dtype))
        attended, _ = self.control_attention(self.control_norm(tokens), keys, keys, need_weights=False)
        return tokens + self.control_zero(attended)

    def forward(self, tokens: Tensor, context: Any, control: Tensor | None) -> list[Tensor]:
        """``K`` residuals ``(N, L, D)`` for the frozen blocks ``0 .. K-1``; ``control=None``: no control path."""
        hidden = tokens if control is None else self.embed_control(tokens, control)
        residuals = []
        for block, zero in zip(self.blocks, self.zero_layers, strict=True):
            hidden = self.run_block(block, hidden, context)
            residuals.append(zero(hidden))
        return residuals


__all__ = ["BlockRunner", "TransformerHyperNet", "zero_linear"]
