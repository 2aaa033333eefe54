"""Log a test case's origin and result images to the experiment tracker."""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger


class CaseImageLogger(L.Callback):
    """At the end of a fit, logs ``[origin | result | |difference|]`` of the case to every logger that takes
    images (W&B, TensorBoard). The method exposes ``origin_image`` and ``result.image``, each ``(1, C, H, W)``."""

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        result = getattr(pl_module, "result", None)
        origin = getattr(pl_module, "origin_image", None)
        if result is None or result.image is None or origin is None:
            return
        origin, image = origin[0].detach().cpu(), result.image[0].detach().cpu()
        panel = torch.cat([origin, image, (image - origin).abs()], dim=-1).clamp(0, 1)
        caption = f"found={result.found} step={result.step}"
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_image("case/origin_result_diff", [panel], step=trainer.global_step, caption=[caption])
            elif isinstance(logger, TensorBoardLogger):
                logger.experiment.add_image("case/origin_result_diff", panel, trainer.global_step)
