"""Per-run galleries of the report: every case, the valid failures and the semantic changes, each drawn by
:func:`hynea_pl.report.grid.case_grid` (origin / result / difference upscaled to >= 96 px, with the class, the
SUT's label and the verdict above each case)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hynea_pl.report.grid import case_grid
from hynea_pl.schema import CaseRecord
from hynea_pl.verdicts import SEMANTIC_CHANGE, VALID_FAILURE, Verdict

__all__ = ["GALLERIES", "Gallery", "write_galleries"]

#: (key, title, which cases): the galleries of a run, in order.
GALLERIES: tuple[tuple[str, str, Verdict | None], ...] = (
    ("cases", "all cases", None),
    ("valid_failures", "valid failures (flipped, the oracle still reads the origin's class)", VALID_FAILURE),
    ("semantic_changes", "semantic changes (flipped, the oracle reads the SUT's new label: not a fault)",
     SEMANTIC_CHANGE),
)
MIN_SIZE = 96


@dataclass
class Gallery:
    """One gallery of a run: ``path`` is None when no case fits (``n_total`` 0)."""

    key: str
    title: str
    n_total: int
    n_shown: int
    path: Path | None


def write_galleries(run_dir: Path, records: Sequence[CaseRecord], out_dir: Path, stem: str,
                    max_cases: int = 20, columns: int = 10) -> list[Gallery]:
    """Write ``<stem>_<key>.png`` into ``out_dir`` for each of :data:`GALLERIES` (the first ``max_cases`` cases of
    each, in the run's order) and return what was written."""
    cases = [r for r in records if r.is_case]
    galleries = []
    for key, title, verdict in GALLERIES:
        chosen = [r for r in cases if verdict is None
                  or (r.is_valid_failure if verdict == VALID_FAILURE else r.verdict == verdict)]
        shown = chosen[:max_cases]
        path = None
        if shown:
            path = Path(out_dir) / f"{stem}_{key}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            head = f"{shown[0].method} / {Path(run_dir).name}: {title.split(' (')[0]}, {len(shown)} of {len(chosen)}"
            case_grid(Path(run_dir), shown, title=head, min_size=MIN_SIZE, columns=columns).save(path)
        galleries.append(Gallery(key, title, len(chosen), len(shown), path))
    return galleries
