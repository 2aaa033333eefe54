"""Human-study statistics: Fleiss' kappa, Wilcoxon signed-rank, Cohen's d."""

import math

import numpy as np
import pytest

from hynea_pl.metrics.functional import cohens_d, fleiss_kappa, ratings_to_table, wilcoxon_signed_rank

# Fleiss (1971) / Wikipedia worked example: 10 subjects, 14 raters, 5 categories -> kappa = 0.210
WIKI = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_hand_values():
    assert fleiss_kappa(WIKI) == pytest.approx(0.20993, abs=1e-4)
    # two raters, two subjects: perfect agreement on different categories -> 1
    assert fleiss_kappa(ratings_to_table([[0, 0], [1, 1]], 2)) == pytest.approx(1.0)
    # systematic disagreement: P_i = 0, P_e = 0.5 -> -1
    assert fleiss_kappa(ratings_to_table([[0, 1], [0, 1]], 2)) == pytest.approx(-1.0)
    # everybody picks the same category: kappa undefined
    assert math.isnan(fleiss_kappa(ratings_to_table([[1, 1], [1, 1]], 3)))
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 0]])  # unequal numbers of raters
    # table [[3,0,0],[0,2,1]]: P = (1, 1/3), p = (1/2, 1/3, 1/6), P_e = 14/36
    expected = ((1 + 1 / 3) / 2 - 14 / 36) / (1 - 14 / 36)
    assert fleiss_kappa(ratings_to_table([[0, 0, 0], [1, 1, 2]], 3)) == pytest.approx(expected)


def test_wilcoxon_and_cohens_d():
    x = [1.1, 2.2, 3.3, 4.4, 5.5]
    y = [0.0, 0.0, 0.0, 0.0, 0.0]
    # all 5 differences positive: exact two-sided p = 2 / 2^5
    stat, p = wilcoxon_signed_rank(x, y)
    assert p == pytest.approx(0.0625)
    assert math.isnan(wilcoxon_signed_rank([1.0, 2.0], [1.0, 2.0])[1])

    assert cohens_d([1, 2, 3], [3, 4, 5]) == pytest.approx(-2.0)
    # paired d_z: differences (1, 2, 2, 3): mean 2, sd sqrt(2/3)
    assert cohens_d([1, 2, 3, 4], [0, 0, 1, 1], paired=True) == pytest.approx(2 / math.sqrt(2 / 3))
    assert math.isnan(cohens_d([1, 1], [1, 1]))
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 40), rng.normal(0.5, 2, 30)
    pooled = math.sqrt((39 * a.var(ddof=1) + 29 * b.var(ddof=1)) / 68)
    assert cohens_d(a, b) == pytest.approx((a.mean() - b.mean()) / pooled)
