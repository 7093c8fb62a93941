"""How far a team agrees: per annotator, per pair of annotators, and over the whole project.

Per annotator: their answers, the share that agrees with the consensus, their estimated
accuracy with a 95% interval and their check questions (asked, failed). Per pair of annotators
with at least :data:`KAPPA_MIN_SHARED` shared pairs: Cohen's κ (scikit-learn). Over the
project: Krippendorff's α, nominal (the ``krippendorff`` package).
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations

import numpy as np
from scipy.stats import beta

from reasoning.consensus.core import Consensus, Vote, effective_answers
from reasoning.consensus.em import PSEUDO_COUNT

__all__ = [
    "KAPPA_MIN_SHARED",
    "Agreement",
    "AnnotatorAgreement",
    "Checks",
    "Interval",
    "PairKappa",
    "agreement",
]

KAPPA_MIN_SHARED = 20
"""The fewest pairs two annotators must share for their Cohen's κ to be reported."""


@dataclass(frozen=True)
class Interval:
    """An estimate and its 95% interval."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class Checks:
    """Check questions an annotator answered, and how many they answered negative."""

    asked: int = 0
    failed: int = 0


@dataclass(frozen=True)
class AnnotatorAgreement:
    """One annotator's row: ``agreement`` is the share of their answers that agrees with the
    consensus (None without answers)."""

    annotator: str | None
    answers: int
    agreement: float | None
    accuracy: Interval | None
    checks: Checks = field(default_factory=Checks)


@dataclass(frozen=True)
class PairKappa:
    """Cohen's κ of two annotators over the pairs both answered (None when undefined)."""

    a: str | None
    b: str | None
    shared: int
    kappa: float | None


@dataclass(frozen=True)
class Agreement:
    """The agreement of a set of answers with their consensus; :meth:`as_dict` is the JSON
    shape of the service's agreement view (without its ``policy``)."""

    annotators: list[AnnotatorAgreement]
    pairs: list[PairKappa]
    alpha: float | None
    answers: int

    def as_dict(self) -> dict:
        """Plain dictionaries and lists."""
        return asdict(self)


def _interval(estimate: float, n: int) -> Interval:
    """A Beta interval around ``estimate`` worth ``n`` answers plus the prior's pseudo-counts."""
    weight = n + PSEUDO_COUNT
    low, high = beta.ppf([0.025, 0.975], estimate * weight + 1e-9,
                         (1.0 - estimate) * weight + 1e-9)
    return Interval(float(estimate), float(low), float(high))


def _rows(plain: list[Vote], result: Consensus) -> list[AnnotatorAgreement]:
    stats: dict[str | None, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for ans in plain:
        row = stats[ans.annotator]
        row[0] += 1
        row[1] += result.values.get((ans.a, ans.b)) == ans.positive
        row[2] += ans.check
        row[3] += ans.check and not ans.positive
    out = []
    for name, (n, agree, asked, failed) in stats.items():
        acc = result.accuracy.get(name)
        out.append(AnnotatorAgreement(
            name, n, agree / n if n else None,
            None if acc is None else _interval(acc, n), Checks(asked, failed)))
    return sorted(out, key=lambda r: (r.annotator is None, str(r.annotator)))


def _kappas(by: dict[str | None, dict]) -> list[PairKappa]:
    from sklearn.metrics import cohen_kappa_score

    out = []
    names = sorted(by, key=lambda n: (n is None, str(n)))
    for x, y in combinations(names, 2):
        shared = by[x].keys() & by[y].keys()
        if len(shared) < KAPPA_MIN_SHARED:
            continue
        keys = sorted(shared, key=repr)
        first = [by[x][k] for k in keys]
        second = [by[y][k] for k in keys]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kappa = float(cohen_kappa_score(first, second, labels=[False, True]))
        out.append(PairKappa(x, y, len(shared), None if math.isnan(kappa) else kappa))
    return out


def _alpha(by: dict[str | None, dict]) -> float | None:
    import krippendorff

    pairs = sorted({k for answers in by.values() for k in answers}, key=repr)
    if len(by) < 2 or not pairs:
        return None
    column = {k: c for c, k in enumerate(pairs)}
    data = np.full((len(by), len(pairs)), np.nan)
    for r, answers in enumerate(by.values()):
        for k, v in answers.items():
            data[r, column[k]] = float(v)
    if ((~np.isnan(data)).sum(axis=0) >= 2).sum() == 0:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alpha = float(krippendorff.alpha(reliability_data=data,
                                             level_of_measurement="nominal"))
    except (ValueError, ZeroDivisionError):
        return None
    return None if math.isnan(alpha) else alpha


def agreement(answers: Sequence[Vote], result: Consensus) -> Agreement:
    """The agreement of ``answers`` with their consensus ``result`` (module docstring).

    Only the answers that count enter (per annotator and pair the latest; reviewer answers
    apart); ``answers`` of the result counts every answer given.

    Examples
    --------
    >>> from reasoning.consensus.core import consensus
    >>> team = [Vote("x", "y", True, "ann"), Vote("x", "y", False, "bob")]
    >>> view = agreement(team, consensus(team, "xy"))
    >>> [row.answers for row in view.annotators], view.answers
    ([1, 1], 2)
    """
    plain, _ = effective_answers(answers)
    by: dict[str | None, dict] = defaultdict(dict)
    for ans in plain:
        by[ans.annotator][(ans.a, ans.b)] = ans.positive
    return Agreement(_rows(plain, result), _kappas(by), _alpha(by), len(answers))
