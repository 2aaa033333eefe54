"""Baseline test-input generators (GIFTbench, SINVAD, Mimicry, truncation probes, cfg-first-flip) on hynea_pl's
framework, and ``natural``, a reference row that generates nothing (real images read until the SUT misreads one)."""
