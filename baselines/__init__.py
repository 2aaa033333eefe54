"""Baseline test-input generators (GIFTbench, SINVAD, Mimicry, truncation probes) on hynea_pl's framework."""
