"""``python -m hynea_pl fit``: parse the options, build the :class:`~hynea_pl.campaign.campaign.Campaign`, run it."""

from __future__ import annotations

import warnings

from hynea_pl.campaign.campaign import Campaign
from hynea_pl.campaign.config import parse_config, quiet_lightning_info
from hynea_pl.campaign.runner import RecordsHook, run_campaign


def fit(args: list[str], on_records: RecordsHook | None = None) -> dict:
    """Run the campaign of ``fit``'s options (``["--config", "CONFIG.yaml", ...]``), calling ``on_records`` with
    the run folder and its records at the end (:func:`~hynea_pl.campaign.runner.run_campaign`); returns its
    summary (``{}`` on ranks other than 0)."""
    quiet_lightning_info()
    # frozen generator and SUT stay in eval mode on purpose; Lightning warns about it at every fit
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode")
    # lightning 2.6 calls a torch pytree API that torch 2.14 deprecates; nothing for users to act on
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    # a population search trains no parameters (one step = one generation): Lightning's no-op optimizer is intended
    warnings.filterwarnings("ignore", message=r".*configure_optimizers.* returned .None., this fit will run with no")
    return run_campaign(Campaign.from_config(parse_config(args)), on_records)


__all__ = ["fit"]
