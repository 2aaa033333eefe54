"""Campaigns: case selection, the per-case loop, run folders and summaries."""

from hynea_pl.campaign.cases import CaseSelection, TestCase, iter_cases
from hynea_pl.campaign.records import RunFolder
from hynea_pl.campaign.runner import RunOutput, run_campaign
from hynea_pl.campaign.summary import summarize_records

__all__ = ["CaseSelection", "RunFolder", "RunOutput", "TestCase", "iter_cases", "run_campaign", "summarize_records"]
