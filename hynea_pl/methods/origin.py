"""The origin of a test case, built the same way by HyNeA and every baseline (so all start from one image)."""

from __future__ import annotations

import torch

from hynea_pl.methods.base import TestCaseModule


@torch.no_grad()
def register_origin(module: TestCaseModule, seed: int, origin_class: int | None, target: int | None,
                    target_rank: int = 0) -> None:
    """Move ``module.generator`` and ``module.sut`` to the module's device and register the case's buffers:

    - ``condition`` (a plain attribute): what the generator conditions on, the one the campaign gave, else
      ``generator.case_condition(origin_class, seed)`` (the class; a scene generator's layout);
    - ``noise (1, C, h, w)`` from ``seed``, or the one the campaign gave (an origin inverted from a real image);
    - ``origin_image (1, C, H, W)``: the image the campaign sampled when it validated the origin
      (:meth:`TestCaseModule.provide_origin`), else sampled here for ``origin_class``;
    - ``origin_output``: the SUT on it (not counted as an evaluation, for every method alike);
    - ``target (1,)``: explicit, or the SUT task's candidate ``target_rank`` (:meth:`SUT.target_candidates`,
      counted round: 0 is its default target, a classifier's second most likely class; 1 the third; ...);
    - ``objective``: what the behaviour loss pulls toward, fixed once from the origin (``SUT.objective_labels``).
    """
    generator, sut = module.generator, module.sut
    device = module.trainer.strategy.root_device if module._trainer is not None else generator.device
    generator.to(device)
    sut.to(device)
    given_condition = module._given_condition
    module.condition = (given_condition if given_condition is not None
                        else generator.case_condition(origin_class, seed))
    given_noise = module._given_noise
    noise = given_noise.to(device) if given_noise is not None else generator.initial_noise(seed)
    module.register_buffer("noise", noise, persistent=False)
    given = module._given_origin
    origin = given.to(device) if given is not None else generator.sample(module.noise, module.condition)
    module.register_buffer("origin_image", origin, persistent=False)
    module.register_buffer("origin_output", sut(module.origin_image), persistent=False)
    if target is None:
        candidates = sut.target_candidates(module.origin_output, origin_class)
        chosen = candidates[..., target_rank % candidates.shape[-1]]
    else:
        chosen = torch.full(module.origin_output.shape[:1], target, dtype=torch.long, device=device)
    module.register_buffer("target", chosen, persistent=False)
    module.register_buffer("objective", sut.objective_labels(module.origin_output, chosen), persistent=False)
