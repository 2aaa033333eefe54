"""Campaigns: the typed Campaign built from a config, case selection, the per-case loop, run folders and summaries."""

from hynea_pl.campaign.campaign import Campaign
from hynea_pl.campaign.case_types import CaseSelection, TestCase
from hynea_pl.campaign.cases import iter_cases
from hynea_pl.campaign.config import RunOutput
from hynea_pl.campaign.records import RunFolder
from hynea_pl.campaign.runner import run_campaign
from hynea_pl.campaign.summary import summarize_records

__all__ = ["Campaign", "CaseSelection", "RunFolder", "RunOutput", "TestCase", "iter_cases", "run_campaign",
           "summarize_records"]
