"""A layout-conditioned scene generator built from a frozen class-conditional LDM.

A scene is a :class:`~hynea_pl.scene_layout.SceneLayout` (1-3 digits: their classes and the squares they fill on
a 64 px canvas) drawn from the case's seed by the sampler that makes the training scenes
(:func:`~hynea_pl.scene_layout.sample_layout`), and one latent noise per digit. Each digit is sampled by the
class-conditional LDM (DDIM, classifier-free guidance) for its class, its 28x28 centre is resized into its square
(bilinear, antialiased) and the digits are composited by pixel-wise maximum, like the training scenes. Every step is
differentiable, so HyNeA's HyperNet adapts the shared denoiser of every digit at once (each digit gets its own slice
of the control), and a population search perturbs the per-digit noises; the layout never changes within a case.

Shapes (``K = max_digits``, ``(C, h, w)`` the LDM's latent shape): a scene's noise and latents are
``(B, K * C, h, w)``, digit ``k`` in channels ``k * C:(k + 1) * C`` (the slots past a layout's digits are unused);
images are ``(B, 1, size, size)`` in [0, 1].
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt
from torch import Tensor

from hynea_pl.generators.class_conditional import ClassConditionalLDM
from hynea_pl.paths import resolve_path
from hynea_pl.scene_layout import SceneConfig, SceneLayout, digit_crops, ink_box, sample_layout

#: The layout settings file of a layout generator's folder (beside the LDM's ``unet/``, ``vae/``, ...).
LAYOUT_FILE = "layout.json"
#: Layout seeds are the case's seed plus this offset, so a layout's draws never share a stream with its noises.
LAYOUT_SEED_OFFSET = 1 << 40



def write_layout_settings(folder: str | Path, cfg: SceneConfig, ldm: str | None = None) -> None:
    """Write ``layout.json`` (the :class:`SceneConfig` fields) into a layout generator's folder; ``ldm``: where its
    class-conditional LDM is (a folder or ``zoo://`` location) when it is not in the folder itself."""
    fields = {name: getattr(cfg, name) for name in SceneConfig.__dataclass_fields__}
    (Path(folder) / LAYOUT_FILE).write_text(json.dumps({**fields, **({"ldm": ldm} if ldm else {})}, indent=2))


def read_layout_settings(folder: str | Path) -> tuple[SceneConfig, str]:
    """The :class:`SceneConfig` of a layout generator's folder and where its LDM is (the folder itself unless
    ``layout.json`` names another); a one-line error when it has no ``layout.json``."""
    path = Path(folder) / LAYOUT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"LayoutSceneGenerator: no {LAYOUT_FILE} in '{folder}' (a class-conditional LDM folder "
                                f"plus {LAYOUT_FILE}; zoo://<profile>/layout_scenes is one)")
    fields = json.loads(path.read_text())
    ldm = fields.pop("ldm", None) or str(folder)
    return SceneConfig(**fields), ldm


class LayoutSceneGenerator(ClassConditionalLDM):
    """A frozen class-conditional LDM (:class:`~hynea_pl.generators.ClassConditionalLDM`) drawing each digit of a
    seeded layout into its square of the canvas.

    Args:
        pretrained: a folder with the class-conditional LDM's ``unet/``, ``vae/``, ``scheduler/``,
            ``class_embedding/`` and ``layout.json`` (the :class:`~hynea_pl.scene_layout.SceneConfig` of the
            layouts; its ``ldm`` key, when present, names the LDM's folder or ``zoo://`` location instead), or
            ``zoo://<profile>/layout_scenes`` (the MNIST zoo's LDM, gated on the scene SUTs).
        num_inference_steps, guidance_scale, eta: the digit LDM's DDIM sampling (as
            :class:`~hynea_pl.generators.ClassConditionalLDM`).
        dtype: weights dtype.
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`.

    A case's condition is its layout (:meth:`case_condition`); ``sample`` / ``denoise`` / ``decode`` take one
    :class:`SceneLayout` for every row or a sequence of one per row.
    """

    #: SINVAD searches an autoencoder's latent of the whole image; a scene has one latent per digit, placed by its
    #: layout, so the scene generator offers no whole-image autoencoder.
    encode = None

    def __init__(
        self,
        pretrained: str = "zoo://full/layout_scenes",
        num_inference_steps: PositiveInt = 20,
        guidance_scale: NonNegativeFloat = 3.0,
        eta: ClosedUnitInterval = 0.0,
        dtype: str = "float32",
        **memory: Any,
    ) -> None:
        layout, ldm = read_layout_settings(resolve_path(pretrained))
        super().__init__(ldm, num_inference_steps=num_inference_steps, guidance_scale=guidance_scale, eta=eta,
                         dtype=dtype, **memory)
        self.layout = layout

    # ------------------------------------------------------------------ shapes and conditions
    @property
    def digit_latent_shape(self) -> tuple[int, int, int]:
        """``(C, h, w)`` of one digit's latent (the LDM's)."""
        return super().latent_shape

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        """``(K * C, h, w)``: one digit latent per slot, ``K = max_digits``."""
        c, h, w = self.digit_latent_shape
        return (self.layout.max_digits * c, h, w)

    @property
    def num_classes(self) -> int:
        return int(self.condition_encoder.config.num_classes)

    def case_condition(self, origin_class: int | None, seed: int) -> SceneLayout:
        """The case's layout, drawn from its ``seed`` (``origin_class`` is the SUT's business: a scene case is any
        layout whose origin the SUT and the judges accept)."""
        return sample_layout(seed + LAYOUT_SEED_OFFSET, self.layout, self.num_classes)

    def _layouts(self, condition: Any, batch: int) -> list[SceneLayout]:
        if isinstance(condition, SceneLayout):
            return [condition] * batch
        if isinstance(condition, (list, tuple)) and all(isinstance(c, SceneLayout) for c in condition):
            if len(condition) == 1:
                return list(condition) * batch
            if len(condition) == batch:
                return list(condition)
        raise TypeError(f"LayoutSceneGenerator conditions on a SceneLayout (one, or one per row of {batch}), "
                        f"got {type(condition).__name__}")

    def _digits(self, layouts: list[SceneLayout]) -> tuple[Tensor, Tensor]:
        """The flat slot index ``b * K + k`` ``(N,)`` and the class ``(N,)`` of every digit of ``layouts``."""
        k_max = self.layout.max_digits
        slots, classes = [], []
        for b, layout in enumerate(layouts):
            if len(layout) > k_max:
                raise ValueError(f"a layout of {len(layout)} digits does not fit {k_max} noise slots")
            slots += [b * k_max + k for k in range(len(layout))]
            classes += list(layout.classes)
        return (torch.tensor(slots, dtype=torch.long, device=self.device),
                torch.tensor(classes, dtype=torch.long, device=self.device))

    def _per_digit(self, x: Tensor, slots: Tensor) -> Tensor:
        """``(B, K * C, h, w)`` -> the used slots' ``(N, C, h, w)``."""
        return x.reshape(-1, *self.digit_latent_shape).index_select(0, slots.to(x.device))

    # ------------------------------------------------------------------ the chain
    def denoise(self, noise: Tensor, condition: Any = None, hypernet: torch.nn.Module | None = None,
                control: Tensor | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Every digit's chain at once: ``noise (B, K * C, h, w)`` -> latents of the same shape (unused slots 0).
        ``control (B, K * C, h, w)`` gives each digit its own slice."""
        batch = noise.shape[0]
        slots, classes = self._digits(self._layouts(condition, batch))
        digit_control = None if control is None else self._per_digit(control, slots)
        latents = super().denoise(self._per_digit(noise, slots), classes, hypernet, digit_control, generator)
        flat = latents.new_zeros(batch * self.layout.max_digits, *self.digit_latent_shape)
        return flat.index_copy(0, slots.to(latents.device), latents).reshape(batch, *self.latent_shape)

    def denoising_loss(self, latents: Tensor, condition: Any, t: Tensor, noise: Tensor) -> Tensor:
        """The frozen denoiser's loss on every placed digit's latents (for its class)."""
        slots, classes = self._digits(self._layouts(condition, latents.shape[0]))
        return super().denoising_loss(self._per_digit(latents, slots), classes, t, self._per_digit(noise, slots))

    def digit_patches(self, latents: Tensor, condition: Any) -> tuple[list[SceneLayout], list[Tensor]]:
        """Each placed digit's patch ``(1, side, side)``: the decoded digit's 28x28 centre resized to its square."""
        layouts = self._layouts(condition, latents.shape[0])
        slots, _ = self._digits(layouts)
        crops = digit_crops(super().decode(self._per_digit(latents, slots)))
        sides = [side for layout in layouts for _, _, side in layout.squares]
        patches = [F.interpolate(crops[i:i + 1], size=(side, side), mode="bilinear", antialias=True,
                                 align_corners=False)[0].clamp(0, 1) for i, side in enumerate(sides)]
        return layouts, patches

    def _composite(self, layouts: list[SceneLayout], patches: list[Tensor]) -> Tensor:
        """The digits' ``patches`` (layout-major) in their squares, pixel-wise maximum: ``(B, 1, size, size)``."""
        size = self.layout.size
        scenes, i = [], 0
        for layout in layouts:
            canvas = patches[i].new_zeros(1, size, size)
            for x, y, side in layout.squares:
                canvas = torch.maximum(canvas, F.pad(patches[i], (x, size - x - side, y, size - y - side)))
                i += 1
            scenes.append(canvas)
        return torch.stack(scenes)

    def decode(self, latents: Tensor, condition: Any = None) -> Tensor:
        """Scene latents ``(B, K * C, h, w)`` -> scenes ``(B, 1, size, size)`` in [0, 1]: each digit in its square,
        composited by pixel-wise maximum (differentiable)."""
        if condition is None:
            raise TypeError("LayoutSceneGenerator.decode needs the scenes' layouts (decode(latents, layout))")
        return self._composite(*self.digit_patches(latents, condition))

    @torch.no_grad()
    def render(self, noise: Tensor, condition: Any) -> tuple[Tensor, list[Tensor]]:
        """One sampling of the scenes: the images ``(B, 1, size, size)`` (as :meth:`sample`) and, per scene, the ink
        box ``(n, 4)`` of each digit (xyxy canvas pixels, exclusive ends, the training scenes' convention: pixels >
        ``ink_threshold`` of the digit's own patch; a digit with no ink gets its square)."""
        layouts, patches = self.digit_patches(self.denoise(noise, condition), condition)
        boxes, i = [], 0
        for layout in layouts:
            rows = []
            for x, y, side in layout.squares:
                local = ink_box(patches[i][0], self.layout.ink_threshold) or (0, 0, side, side)
                rows.append([x + local[0], y + local[1], x + local[2], y + local[3]])
                i += 1
            boxes.append(torch.tensor(rows, dtype=torch.float32))
        return self._composite(layouts, patches), boxes

    def describe_condition(self, condition: Any, noise: Tensor) -> dict:
        """What a record keeps of a case's layout: ``size``, ``classes``, ``squares`` and the origin's ink
        ``boxes``."""
        layout = self._layouts(condition, 1)[0]
        return {**layout.as_dict(), "boxes": self.render(noise[:1], layout)[1][0].int().tolist()}


__all__ = ["LAYOUT_FILE", "LayoutSceneGenerator", "read_layout_settings", "write_layout_settings"]
