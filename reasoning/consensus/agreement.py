"""How far a team agrees: per annotator, per pair of annotators, and over the whole project.

Per annotator: their answers, the share that agrees with the consensus, their estimated
accuracy with a 95% interval and their check questions (asked, failed); what a lead acts on:
their false "no" and false "yes" against the consensus, their minority answers, how many of
their pairs someone else answered too (fewer than :data:`PRIOR_MIN_SHARED`: the estimate rests
on the prior), whether anything tells their estimate apart from that of whoever contradicts
them (``identifiable``), and their agreement over windows of their answers in time order
(:data:`TREND_WINDOW`, :data:`TREND_WINDOWS`). The reviewers (who resolved disagreements) are
listed apart: a resolution is final for its pair, not an answer scored against the consensus.
Per pair of annotators with at least :data:`KAPPA_MIN_SHARED` shared pairs: Cohen's κ
(scikit-learn). Over the project: Krippendorff's α, nominal (the ``krippendorff`` package).
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations

import numpy as np
from scipy.stats import beta

from reasoning.consensus.core import Consensus, Vote, effective_answers
from reasoning.consensus.em import PSEUDO_COUNT

__all__ = [
    "KAPPA_MIN_SHARED",
    "PRIOR_MIN_SHARED",
    "TREND_WINDOW",
    "TREND_WINDOWS",
    "Agreement",
    "AnnotatorAgreement",
    "Checks",
    "Interval",
    "PairKappa",
    "Reviewer",
    "Window",
    "agreement",
]

KAPPA_MIN_SHARED = 20
"""The fewest pairs two annotators must share for their Cohen's κ to be reported."""

PRIOR_MIN_SHARED = 10
"""An annotator's accuracy *rests on the prior* while fewer than this many of their answers
can be compared with someone else's: a pair another annotator or a reviewer answered too, or a
check question (the order says its truth). An answer nobody else can contradict agrees with
its own posterior, so it leaves the estimate where the prior puts it (0.9, worth
:data:`~reasoning.consensus.em.PSEUDO_COUNT` answers): below ten comparable answers the prior
still weighs at least a sixth of the estimate, and an annotator nobody overlaps shows the
prior's 90% whatever they answer."""

TREND_WINDOW = 20
"""The trend's window: this many consecutive answers of one annotator (those that count, in
the order they came)."""

TREND_WINDOWS = 10
"""The trend shows at most this many windows, the latest last; the windows end at the
annotator's latest answer, so the oldest one shown may be shorter."""


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
class Window:
    """``answers`` consecutive answers of one annotator and the share that agrees with the
    consensus."""

    answers: int
    agreement: float


@dataclass(frozen=True)
class AnnotatorAgreement:
    """One annotator's row (their answers that count: per pair the latest).

    Attributes
    ----------
    agreement : float or None
        The share of their answers whose pair the consensus decides their way (None without
        answers); an answer on a pair it leaves undecided (a tie) does not agree.
    false_no, false_yes : int
        Their "no" on a pair the consensus decides positive, their "yes" on one it decides
        negative.
    minority : int
        Their answers that disagree with the consensus: ``false_no + false_yes``.
    undecided : int
        Their answers on pairs the consensus leaves undecided (``answers`` is the agreeing
        ones, ``minority`` and ``undecided``).
    shared_pairs : int
        Their pairs another annotator or a reviewer answered too.
    rests_on_prior : bool
        Fewer than :data:`PRIOR_MIN_SHARED` of their answers are on a shared pair or a check
        question: ``accuracy`` is mostly the prior's.
    identifiable : bool
        False when someone contradicts them but only one against one, and nothing else (a
        third annotator on a pair, a reviewer's resolution, a check question, a label that
        gave way) in their part of the team says which side is right: their estimate and their
        contradictors' are then alike by symmetry, whoever is right.
    trend : list of Window
        Their agreement over windows of :data:`TREND_WINDOW` answers, oldest first (at most
        :data:`TREND_WINDOWS`).
    note : str or None
        In words, why ``accuracy`` should not be read as is (rests on the prior, not
        identifiable); None when nothing needs saying.
    """

    annotator: str | None
    answers: int
    agreement: float | None
    accuracy: Interval | None
    checks: Checks = field(default_factory=Checks)
    false_no: int = 0
    false_yes: int = 0
    minority: int = 0
    undecided: int = 0
    shared_pairs: int = 0
    rests_on_prior: bool = True
    identifiable: bool = True
    trend: list[Window] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True)
class Reviewer:
    """Someone who resolved disagreements: their live ``resolutions`` and the pairs where a
    resolution of theirs is the one that stands (``final``)."""

    annotator: str | None
    resolutions: int
    final: int


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
    reviewers: list[Reviewer] = field(default_factory=list)
    minority: dict[str | None, list[int]] = field(default_factory=dict, repr=False)
    """Per annotator, the ``order`` of each of their minority answers, in order (not part of
    :meth:`as_dict`: the service lists the answers themselves)."""

    def as_dict(self) -> dict:
        """Plain dictionaries and lists."""
        shape = asdict(self)
        del shape["minority"]
        return shape


def _interval(estimate: float, n: int) -> Interval:
    """A Beta interval around ``estimate`` worth ``n`` answers plus the prior's pseudo-counts."""
    weight = n + PSEUDO_COUNT
    low, high = beta.ppf([0.025, 0.975], estimate * weight + 1e-9,
                         (1.0 - estimate) * weight + 1e-9)
    return Interval(float(estimate), float(low), float(high))


Pair = tuple[Hashable, Hashable]


class _Team:
    """The answers that count, indexed: per annotator theirs in order, per pair who answered
    it, the reviewed pairs, and the annotators whose part of the team has evidence beyond
    one-against-one answers."""

    def __init__(self, plain: list[Vote], review: dict[Pair, Vote], result: Consensus) -> None:
        self.result = result
        self.mine: dict[str | None, list[Vote]] = defaultdict(list)
        self.who: dict[Pair, set[str | None]] = defaultdict(set)
        self.said: dict[Pair, set[bool]] = defaultdict(set)
        for ans in sorted(plain, key=lambda v: v.order):
            self.mine[ans.annotator].append(ans)
            self.who[(ans.a, ans.b)].add(ans.annotator)
            self.said[(ans.a, ans.b)].add(ans.positive)
        self.reviewed = set(review)
        self.anchored = self._anchored(plain)

    def shared(self, ans: Vote) -> bool:
        """Whether someone else (another annotator or a reviewer) answered its pair."""
        pair = (ans.a, ans.b)
        return len(self.who[pair]) > 1 or pair in self.reviewed

    def _anchored(self, plain: list[Vote]) -> set[str | None]:
        """The annotators whose part of the team (those linked by shared pairs) answered a
        pair whose truth more than one-against-one answers speak for: three annotators or
        more, a reviewer's resolution, a check question, a label that gave way."""
        parent: dict[str | None, str | None] = {name: name for name in self.mine}

        def root(name: str | None) -> str | None:
            while parent[name] != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name

        for names in self.who.values():
            first, *rest = names
            for other in rest:
                parent[root(other)] = root(first)
        gave = set(self.result.gave_way)
        anchors = {root(ans.annotator) for ans in plain
                   if ans.check or (ans.a, ans.b) in self.reviewed or (ans.a, ans.b) in gave
                   or len(self.who[(ans.a, ans.b)]) >= 3}
        return {name for name in self.mine if root(name) in anchors}

    def contradicted(self, given: list[Vote]) -> bool:
        """Whether another annotator answered one of ``given``'s pairs the other way (one
        annotator's answers that count hold one per pair)."""
        return any(len(self.said[(ans.a, ans.b)]) == 2 for ans in given)


def _trend(hits: list[bool]) -> list[Window]:
    """Windows of :data:`TREND_WINDOW` of ``hits`` ending at the last one, oldest first, at
    most :data:`TREND_WINDOWS`.

    Examples
    --------
    >>> [(w.answers, w.agreement) for w in _trend([True] * 25 + [False] * 20)]
    [(5, 1.0), (20, 1.0), (20, 0.0)]
    """
    ends = range(len(hits), 0, -TREND_WINDOW)[:TREND_WINDOWS]
    windows = [hits[max(0, end - TREND_WINDOW):end] for end in reversed(ends)]
    return [Window(len(w), sum(w) / len(w)) for w in windows]


def _note(comparable: int, identifiable: bool, prior: float) -> str | None:
    """Why the accuracy estimate should not be read as is, in words (None: nothing to say)."""
    said = []
    if comparable < PRIOR_MIN_SHARED:
        said.append(
            f"Only {comparable} of their answers can be compared with someone else's (a pair "
            f"another person answered, or a check question), fewer than {PRIOR_MIN_SHARED}: "
            f"the estimated accuracy is mostly the prior ({prior:.0%}), not their answers.")
    if not identifiable:
        said.append(
            "Where others contradict them it is one answer against one, and nothing (a third "
            "answer, a reviewer's resolution, a check question) says which side is right: "
            "their estimate and their contradictors' are alike whoever is right. Resolve "
            "their disagreements or ask a third person.")
    return " ".join(said) or None


def _row(team: _Team, name: str | None, given: list[Vote], prior: float) -> AnnotatorAgreement:
    values = team.result.values
    verdict = [values.get((ans.a, ans.b)) for ans in given]
    hits = [v == ans.positive for ans, v in zip(given, verdict, strict=True)]
    false_no = sum(v is True and not ans.positive for ans, v in zip(given, verdict, strict=True))
    false_yes = sum(v is False and ans.positive for ans, v in zip(given, verdict, strict=True))
    n = len(given)
    shared = sum(team.shared(ans) for ans in given)
    comparable = sum(team.shared(ans) or ans.check for ans in given)
    identifiable = name in team.anchored or not team.contradicted(given)
    acc = team.result.accuracy.get(name)
    return AnnotatorAgreement(
        name, n, sum(hits) / n if n else None,
        None if acc is None else _interval(acc, n),
        Checks(sum(ans.check for ans in given),
               sum(ans.check and not ans.positive for ans in given)),
        false_no=false_no, false_yes=false_yes, minority=false_no + false_yes,
        undecided=verdict.count(None), shared_pairs=shared,
        rests_on_prior=comparable < PRIOR_MIN_SHARED, identifiable=identifiable,
        trend=_trend(hits), note=_note(comparable, identifiable, prior))


def _minority(team: _Team) -> dict[str | None, list[int]]:
    """Per annotator, the orders of their answers the consensus decides the other way."""
    values = team.result.values
    return {name: [ans.order for ans in given
                   if values.get((ans.a, ans.b), ans.positive) != ans.positive]
            for name, given in team.mine.items()}


def _reviewers(answers: Sequence[Vote], review: dict[Pair, Vote]) -> list[Reviewer]:
    given: dict[str | None, int] = defaultdict(int)
    final: dict[str | None, int] = defaultdict(int)
    for ans in answers:
        given[ans.annotator] += ans.reviewer
    for ans in review.values():
        final[ans.annotator] += 1
    return [Reviewer(name, count, final[name])
            for name, count in sorted(given.items(), key=lambda x: (x[0] is None, str(x[0])))
            if count]


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


def agreement(answers: Sequence[Vote], result: Consensus, *, prior: float = 0.9) -> Agreement:
    """The agreement of ``answers`` with their consensus ``result`` (module docstring).

    Only the answers that count enter (per annotator and pair the latest; reviewer answers
    apart, in ``reviewers``); ``answers`` of the result counts every answer given. ``prior``
    is the accuracy the consensus was fitted with as its prior (its notes name it).

    Examples
    --------
    >>> from reasoning.consensus.core import consensus
    >>> team = [Vote("x", "y", True, "ann"), Vote("x", "y", False, "bob")]
    >>> view = agreement(team, consensus(team, "xy"))
    >>> [row.answers for row in view.annotators], view.answers
    ([1, 1], 2)
    """
    plain, review = effective_answers(answers)
    by: dict[str | None, dict] = defaultdict(dict)
    for ans in plain:
        by[ans.annotator][(ans.a, ans.b)] = ans.positive
    team = _Team(plain, review, result)
    rows = sorted((_row(team, name, given, prior) for name, given in team.mine.items()),
                  key=lambda r: (r.annotator is None, str(r.annotator)))
    return Agreement(rows, _kappas(by), _alpha(by), len(answers), _reviewers(answers, review),
                     _minority(team))
