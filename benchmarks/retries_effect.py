"""What HyNeA's retries (``retries.attempts``) bring, read from a campaign's records: the same cases capped at fewer runs.

    .venv/bin/python benchmarks/retries_effect.py RUN_DIR [RUN_DIR ...] [--caps 1 3 5 9]

A case's first runs do not depend on how many runs it may make, so a campaign run with up to 9 runs a case also
gives, exactly, the records it would have written with fewer: a case that found its accepted result within ``k`` runs
keeps its record; a case that did not ends unaccepted after its first ``k`` runs, having spent their evaluations.
(A case whose later runs ran side by side in a batch's free slots, ``cases.spare_slots``, is counted as found within
the run that found it, with the evaluations of the runs up to it.) Prints one row per cap: rates over **all cases**
(``valid``: valid failures; ``unaccepted``: no accepted result), and the mean and per-valid-failure SUT evaluations.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table


def capped(record: dict, cap: int) -> tuple[bool, bool, int]:
    """``(valid, unaccepted, sut_evals)`` of a record had its case made at most ``cap`` runs."""
    runs = (record.get("diagnostics") or {}).get("attempts") or [
        {"attempt": 0, "found": record.get("accepted") is not False and bool(record.get("flipped")),
         "sut_evals": record["sut_evals"]}]
    runs = sorted(runs, key=lambda run: run["attempt"])
    found = [run["attempt"] for run in runs if run.get("found")]
    if found and found[0] < cap:
        spent = sum(run["sut_evals"] for run in runs if run["attempt"] <= found[0])
        return record["verdict"] == "valid_failure", False, spent
    return False, True, sum(run["sut_evals"] for run in runs if run["attempt"] < cap)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--caps", nargs="+", type=int, default=[1, 3, 5, 9])
    options = parser.parse_args(argv)
    records = [json.loads(line) for run in options.runs
               for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    records = [r for r in records if not r.get("error")]
    table = Table(title=f"{len(records)} cases of {', '.join(str(run) for run in options.runs)}")
    for column in ("runs a case", "valid", "unaccepted", "mean evals", "evals / valid"):
        table.add_column(column, justify="right")
    for cap in options.caps:
        rows = [capped(r, cap) for r in records]
        valid, unaccepted, evals = sum(v for v, _, _ in rows), sum(u for _, u, _ in rows), sum(e for _, _, e in rows)
        table.add_row(str(cap), f"{valid / len(rows):.3f}", f"{unaccepted / len(rows):.3f}", f"{evals / len(rows):.1f}",
                      f"{evals / valid:.1f}" if valid else f"none in {evals}")
    Console().print(table)


if __name__ == "__main__":
    main()
