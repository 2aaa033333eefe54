"""How often the verdict, and HyNeA's own acceptance test, agree with people, measured on tools they were not
calibrated on.

The people: ``shared/human-labels/tig-mnist`` (Riccio & Tonella, ICSE 2023, MIT): 500 MNIST test inputs on which a
classifier failed, 100 from each of five test generators (DeepJanus ``dj``, DLFuzz ``dlf``, DeepXplore ``dx``, a fifth
``ox``, SINVAD ``sv``), all started from 5s, each read by two people. Only the images both people read the same way
count: both read 5 (the verdict should call them valid, the acceptance test accept them), or both read something
else, another digit or "not a digit" (the verdict should refuse them).

Leave one tool out: each calibrated number (the judges' vote threshold; the acceptance test's quantile) is fitted on
four tools and measured on the fifth, in turn; the table gives those held-out figures, tool by tool and pooled. The
vote threshold is fitted to the best balanced agreement (the mean of the share of people's 5s called valid and the
share of the rest refused) among the thresholds that keep the verdict's ceiling on the 10,000 real test digits at
``--ceiling`` or above; the acceptance test's quantile to the most refusals among those that accept at least
``--accept`` of the fitting tools' 5s. The last lines fit each on all five tools: the values the profile ships.

    .venv/bin/python benchmarks/verdict_people.py [--people ../shared/human-labels/tig-mnist] [--profile full]
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from hynea_pl.suts.ensemble import panel_decisions
from hynea_pl.verdicts import NOT_A_CLASS
from hynea_pl.zoo.labelled.acceptance import ZooAcceptance
from hynea_pl.zoo.labelled.oracle_sut import ZooOracle
from hynea_pl.zoo.labelled.realism import held_out_split
from hynea_pl.zoo.profiles import get_profile

DEFAULT_PEOPLE = Path(__file__).resolve().parents[2] / "shared" / "human-labels" / "tig-mnist"
THRESHOLDS = tuple(round(0.5 + 0.025 * i, 3) for i in range(19))
QUANTILES = (0.99, 0.995, 0.999, 0.9995, 0.9999)
UNSURE = -9


def reading(text: str) -> int:
    """A person's answer of the survey: ``Digit N`` -> N, ``Not a digit`` -> NOT_A_CLASS, ``?`` -> unsure."""
    text = text.strip()
    if text.startswith("Digit "):
        return int(text.split()[1])
    return NOT_A_CLASS if text.lower() == "not a digit" else UNSURE


def read_people(folder: Path) -> tuple[torch.Tensor, list[str], torch.Tensor, torch.Tensor]:
    """The survey's images ``(N, 1, 32, 32)`` in [0, 1] (MNIST's 28 px padded by 2 px, like the zoo's digits), their
    tools, expected classes ``(N,)`` and the two people's readings ``(N, 2)``."""
    rows = list(csv.DictReader((folder / "survey.csv").open()))
    images = [np.load(folder / "images" / f"mnist_{r['TOOL']}" / f"{r['ID']}.npy").reshape(28, 28) for r in rows]
    x = F.pad(torch.from_numpy(np.stack(images)).float().clamp(0, 1)[:, None], (2, 2, 2, 2))
    readings = torch.tensor([[reading(r["ASS 1"]), reading(r["ASS 2"])] for r in rows])
    return x, [r["TOOL"] for r in rows], torch.tensor([int(r["Expected"]) for r in rows]), readings


def people_agree(expected: torch.Tensor, readings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(N,)`` masks: both people read the expected class; both gave the same other reading."""
    same = (readings[:, 0] == readings[:, 1]) & (readings[:, 0] != UNSURE)
    return same & (readings[:, 0] == expected), same & (readings[:, 0] != expected)


def counts(accepted: torch.Tensor, kept: torch.Tensor, other: torch.Tensor, where: torch.Tensor) -> tuple[int, ...]:
    """(people's class accepted, people's class, people's other refused, people's other) over ``where``."""
    return (int((accepted & kept & where).sum()), int((kept & where).sum()),
            int((~accepted & other & where).sum()), int((other & where).sum()))


def leave_one_out(tools: Sequence[str], options: Sequence[float], accepted: Callable[[float], torch.Tensor],
                  score: Callable[[tuple[int, ...]], float | None], kept: torch.Tensor, other: torch.Tensor
                  ) -> tuple[dict[str, tuple[float, tuple[int, ...]]], float]:
    """Per tool: the option fitted on the other tools (the best ``score`` of their counts; ``None``: not allowed) and
    the counts on the tool; then the option fitted on all tools."""
    names = list(dict.fromkeys(tools))
    tool = np.array(tools)

    def fit(where: torch.Tensor) -> float:
        scored = [(score(counts(accepted(o), kept, other, where)), o) for o in options]
        allowed = [(s, o) for s, o in scored if s is not None]
        if not allowed:
            raise SystemExit("no option meets the constraint on the fitting tools")
        return max(allowed, key=lambda pair: pair[0])[1]

    out = {}
    for name in names:
        held = torch.from_numpy(tool == name)
        option = fit(~held)
        out[name] = (option, counts(accepted(option), kept, other, held))
    return out, fit(torch.ones(len(tools), dtype=torch.bool))


def table(title: str, what: str, results: dict[str, tuple[float, tuple[int, ...]]]) -> Table:
    shown = Table(title=title)
    for column in ("tool", what, "people's 5s", "accepted", "people's other", "refused", "agreement"):
        shown.add_column(column, justify="left" if column == "tool" else "right")
    total = [0, 0, 0, 0]
    for tool, (option, (a, b, c, d)) in results.items():
        total = [t + v for t, v in zip(total, (a, b, c, d))]
        shown.add_row(tool, f"{option:g}", str(b), f"{a / b:.3f}" if b else "-", str(d), f"{c / d:.3f}" if d else "-",
                      f"{(a + c) / (b + d):.3f}")
    a, b, c, d = total
    shown.add_row("all (held out)", "", str(b), f"{a / b:.3f}", str(d), f"{c / d:.3f}", f"{(a + c) / (b + d):.3f}")
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=Path, default=DEFAULT_PEOPLE, help="the tig-mnist folder")
    parser.add_argument("--profile", default="full")
    parser.add_argument("--ceiling", type=float, default=0.97, help="the verdict's least ceiling on real digits")
    parser.add_argument("--accept", type=float, default=0.9, help="the acceptance test's least share of 5s")
    options = parser.parse_args()
    if not (options.people / "survey.csv").is_file():
        raise SystemExit(f"no survey.csv in {options.people}: pass --people PATH/tig-mnist")
    console = Console(width=120)
    images, tools, expected, readings = read_people(options.people)
    kept, other = people_agree(expected, readings)

    panel = ZooOracle(options.profile, "judges")
    probs = panel.member_probabilities(images)
    digits, labels = held_out_split(options.profile)
    real = panel.member_probabilities(digits)
    ceiling = {t: float((panel_decisions(real, t, panel.not_a_class) == labels).double().mean()) for t in THRESHOLDS}
    valid = {t: panel_decisions(probs, t, panel.not_a_class) == expected for t in THRESHOLDS}

    def balanced(c: tuple[int, ...]) -> float:
        return (c[0] / c[1] + c[2] / c[3]) / 2

    allowed = [t for t in THRESHOLDS if ceiling[t] >= options.ceiling]
    results, shipped = leave_one_out(tools, allowed, valid.__getitem__, balanced, kept, other)
    console.print(table(f"the verdict against people (profile {options.profile}; vote threshold fitted on the other "
                        "tools)", "threshold", results))
    console.print(f"vote threshold fitted on all five tools: {shipped:g} (the profile ships "
                  f"{get_profile(options.profile).vote.threshold}); its ceiling on {len(labels)} real test digits: "
                  f"{ceiling[shipped]:.4f}; thresholds kept by the ceiling >= {options.ceiling}: "
                  f"{allowed[0]:g}-{allowed[-1]:g}")

    fitted = {q: ZooAcceptance(options.profile, quantile=q) for q in QUANTILES}
    accepted = {q: test(images, expected) for q, test in fitted.items()}

    def refusals(c: tuple[int, ...]) -> float | None:
        return c[2] / c[3] if c[0] / c[1] >= options.accept else None

    results, shipped = leave_one_out(tools, QUANTILES, accepted.__getitem__, refusals, kept, other)
    console.print(table("HyNeA's acceptance test against people (quantile fitted on the other tools)", "quantile",
                        results))
    console.print(f"acceptance quantile fitted on all five tools: {shipped:g}")


if __name__ == "__main__":
    main()
