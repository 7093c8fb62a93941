"""The registry of strategies: one frozen :class:`Strategy` object each, and their scores.

A strategy is its name, the spellings it also answers to, the family of the model it scores
with (:mod:`reasoning.strategies.models`), whether the closure's labels join its labeled set,
and a *score function* from a :class:`ScoringContext` to :class:`~reasoning.strategies.scores.
Scores`. Nothing else branches on a strategy's name: :func:`~reasoning.strategies.selection.
score_candidates` prepares the context and calls ``strategy.score``.

The order of :data:`STRATEGIES` is part of the simulation's reproducibility (a strategy's
position seeds its tie-breaks and models), so a new strategy goes at the end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from reasoning.closure import Closure
from reasoning.gains import candidate_gains
from reasoning.strategies.models import Family, ModelOutputs, get_family
from reasoning.strategies.scores import (
    PATH_FLOOR,
    Scores,
    disagreement,
    expected_decided,
    least_confidence,
    path_free_of_contenders,
    scores_by_gain,
)

__all__ = [
    "ALL_STRATEGIES",
    "DEFAULT_STRATEGY",
    "NEW_STRATEGIES",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "ScoreFunction",
    "ScoringContext",
    "Strategy",
    "family",
    "get_strategy",
    "needs_model",
    "parse_strategy",
    "uses_closure",
]


@dataclass(frozen=True)
class ScoringContext:
    """What a score function reads about the candidates it scores.

    Attributes
    ----------
    closure : Closure or None
        The closure of the labels; None when the caller keeps none (a plain strategy).
    pool : int array of shape (m, 2)
        Every pool pair as concept indices of ``closure``.
    rows : int array
        The candidate rows of ``pool`` to score, ascending (never empty).
    values : int8 array of shape (m,) or None
        The decided value of every pool row (1, 0, -1 undecided): the closure's, given to the
        strategies that use the closure, else None.
    outputs : ModelOutputs or None
        The strategy's model on every pool row; None without a fitted model.
    """

    closure: Closure | None
    pool: np.ndarray
    rows: np.ndarray
    values: np.ndarray | None
    outputs: ModelOutputs | None


ScoreFunction = Callable[[ScoringContext], Scores]
"""Scores every candidate of a context (larger is better), ``rows`` as given."""


@dataclass(frozen=True)
class Strategy:
    """A query strategy: how it is named, what it learns from and how it scores.

    Attributes
    ----------
    name : str
        The canonical name (answers and logs carry it).
    family : {"random", "lc", "qbc", "forest"}
        The family of the model it scores with; ``random`` needs none.
    uses_closure : bool
        True when every pair the closure decides joins the labeled set (``-R``, ``-R+``, CNT,
        EDP): its model learns from the decided pairs and it never asks a decided one. False:
        it learns from the answers alone.
    score : ScoreFunction
        The candidates' scores (a module-level function, so that a strategy pickles).
    aliases : tuple of str
        Other spellings that resolve to it (any case), e.g. ``default``.
    """

    name: str
    family: Family
    uses_closure: bool
    score: ScoreFunction
    aliases: tuple[str, ...] = ()

    @property
    def needs_model(self) -> bool:
        """False for the strategies that never look at a classifier (Random, Random-R, CNT)."""
        return get_family(self.family).needs_model

    def __repr__(self) -> str:
        return f"Strategy({self.name!r})"


# ---------------------------------------------------------------------------- score functions
def _proba(context: ScoringContext) -> np.ndarray | None:
    outputs = context.outputs
    return None if outputs is None else outputs.proba


def _votes(context: ScoringContext) -> np.ndarray | None:
    outputs = context.outputs
    return None if outputs is None else outputs.votes


def _positive_share(outputs: ModelOutputs | None, rows: np.ndarray) -> np.ndarray:
    """``p(positive)`` of the rows: the model's, or the share of committee votes (else 0.5)."""
    if outputs is not None and outputs.proba is not None:
        return outputs.proba[rows]
    if outputs is not None and outputs.votes is not None:
        return outputs.votes[:, rows].mean(axis=0)
    return np.full(len(rows), 0.5)


def _closure(context: ScoringContext) -> Closure:
    if context.closure is None:
        raise ValueError("this strategy needs the closure")
    return context.closure


def _gains(context: ScoringContext, weight_positive: np.ndarray | None = None,
           weight_negative: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """What each answer to each candidate newly decides among the undecided pool pairs,
    weighted (every pair counts 1 without weights)."""
    pool = context.pool
    ones = np.ones(len(pool))
    return candidate_gains(_closure(context), pool[context.rows], pool,
                           ones if weight_positive is None else weight_positive,
                           ones if weight_negative is None else weight_negative)


def score_uniform(context: ScoringContext) -> Scores:
    """Random: every candidate scores the same; the tie-break picks uniformly."""
    return Scores(context.rows, np.zeros(len(context.rows)))


def score_least_confident(context: ScoringContext) -> Scores:
    """LC: ``1 - max(p, 1 - p)`` (p = 0.5 without a model)."""
    proba = _proba(context)
    p = np.full(len(context.rows), 0.5) if proba is None else proba[context.rows]
    return Scores(context.rows, least_confidence(p))


def score_disagreement(context: ScoringContext) -> Scores:
    """QBC: the committee members that disagree with the majority (0 without a committee)."""
    votes = _votes(context)
    score = (np.zeros(len(context.rows)) if votes is None
             else disagreement(votes[:, context.rows]).astype(float))
    return Scores(context.rows, score)


def score_count(context: ScoringContext) -> Scores:
    """CNT: the pairs decided whichever the answer, every pair counting 1."""
    gp, gn = _gains(context)
    return Scores(context.rows, scores_by_gain(gp, gn), gp, gn)


def score_lc_gain(context: ScoringContext) -> Scores:
    """LC-R+: the weight decided whichever the answer, pairs weighed ``1 - p`` / ``p``."""
    proba = _proba(context)
    gp, gn = _gains(context) if proba is None else _gains(context, 1.0 - proba, proba)
    return Scores(context.rows, scores_by_gain(gp, gn), gp, gn)


def score_qbc_gain(context: ScoringContext) -> Scores:
    """QBC-R+: as LC-R+ with the members voting negative / positive as the weights."""
    votes = _votes(context)
    if votes is None:
        gp, gn = _gains(context)
    else:
        positive = votes.sum(axis=0).astype(np.float64)
        gp, gn = _gains(context, len(votes) - positive, positive)
    return Scores(context.rows, scores_by_gain(gp, gn), gp, gn)


def score_expected(context: ScoringContext) -> Scores:
    """EDP, EDP-Q: ``p·F(+) + (1 − p)·F(−)``, p the model's or the committee's share."""
    gp, gn = _gains(context)
    p = _positive_share(context.outputs, context.rows)
    return Scores(context.rows, expected_decided(p, gp, gn), gp, gn)


def score_expected_consistent(context: ScoringContext) -> Scores:
    """EDP-C: EDP with the model's p made order-respecting first."""
    from reasoning.consistent import soft_probabilities

    gp, gn = _gains(context)
    outputs, proba = context.outputs, _proba(context)
    if proba is not None:
        outputs = ModelOutputs(proba=soft_probabilities(_closure(context), context.pool, proba))
    p = _positive_share(outputs, context.rows)
    return Scores(context.rows, expected_decided(p, gp, gn), gp, gn)


def score_expected_path_free(context: ScoringContext) -> Scores:
    """EDP-F: ``p·(γ + (1 − γ)·free)·F(+) + (1 − p)·F(−)``."""
    gp, gn = _gains(context)
    proba = _proba(context)
    if proba is None:
        p = _positive_share(context.outputs, context.rows)
        return Scores(context.rows, expected_decided(p, gp, gn), gp, gn)
    proba = np.nan_to_num(proba, nan=0.5)  # a row registered after the model was trained
    p = proba[context.rows]
    free = path_free_of_contenders(context.closure, context.pool, proba, context.rows, p, gp,
                                   gn, context.values)
    weight = PATH_FLOOR + (1.0 - PATH_FLOOR) * free
    return Scores(context.rows, expected_decided(p, weight * gp, gn), gp, gn)


# ---------------------------------------------------------------------------- the registry
STRATEGIES: tuple[Strategy, ...] = (
    # the paper's Table 3
    Strategy("Random", "random", False, score_uniform),
    Strategy("LC", "lc", False, score_least_confident),
    Strategy("QBC", "qbc", False, score_disagreement),
    Strategy("Random-R", "random", True, score_uniform),
    Strategy("LC-R", "lc", True, score_least_confident),
    Strategy("QBC-R", "qbc", True, score_disagreement),
    Strategy("CNT", "random", True, score_count),
    Strategy("LC-R+", "lc", True, score_lc_gain),
    Strategy("QBC-R+", "qbc", True, score_qbc_gain),
    # beyond the paper
    Strategy("EDP", "lc", True, score_expected),
    Strategy("EDP-Q", "qbc", True, score_expected),
    Strategy("EDP-C", "lc", True, score_expected_consistent),
    Strategy("EDP-F", "forest", True, score_expected_path_free, aliases=("default",)),
)
"""Every strategy, in a fixed order (new ones at the end: the position seeds simulations)."""

ALL_STRATEGIES: tuple[str, ...] = tuple(s.name for s in STRATEGIES)
"""Every strategy's name: the paper's nine, then the new ones (``--strategies all``)."""

STRATEGY_NAMES = ALL_STRATEGIES[:9]
"""The strategies in the order of the paper's Table 3."""

NEW_STRATEGIES: tuple[str, ...] = ALL_STRATEGIES[9:]
"""Strategies beyond the paper (see the package docstring)."""

_BY_NAME = {s.name: s for s in STRATEGIES}
_BY_SPELLING = {spelling.lower(): s.name for s in STRATEGIES
                for spelling in (s.name, *s.aliases)}
assert len(_BY_NAME) == len(STRATEGIES), "two strategies of one name"
assert len(_BY_SPELLING) == sum(1 + len(s.aliases) for s in STRATEGIES), "a spelling twice"


def parse_strategy(text: str) -> str:
    """The canonical name of a strategy, read leniently.

    Case does not matter; a trailing ``plus`` may stand for ``+``, and a trailing
    space stands for a ``+`` that a query string decoded into a space. An alias (``default``)
    stands for its strategy, whose own name is returned.

    Examples
    --------
    >>> parse_strategy("lc-r+"), parse_strategy("QBC-Rplus"), parse_strategy("LC-R ")
    ('LC-R+', 'QBC-R+', 'LC-R+')
    >>> parse_strategy("default")
    'EDP-F'
    """
    raw = str(text)
    key = re.sub(r"\s*plus$", "+", raw.strip().lower().replace("_", "-"))
    spellings = [key + "+", key] if raw.endswith(" ") else [key]
    for spelling in spellings:
        if spelling in _BY_SPELLING:
            return _BY_SPELLING[spelling]
    aliases = ", ".join(f"{alias} ({s.name})" for s in STRATEGIES for alias in s.aliases)
    raise ValueError(f"unknown strategy {text!r}; valid: {', '.join(ALL_STRATEGIES)}, "
                     f"or {aliases}")


def get_strategy(text: str | Strategy) -> Strategy:
    """The strategy that ``text`` names (read by :func:`parse_strategy`); a strategy as is.

    Examples
    --------
    >>> get_strategy("lc-rplus")
    Strategy('LC-R+')
    >>> get_strategy("default").family
    'forest'
    """
    if isinstance(text, Strategy):
        return text
    return _BY_NAME[parse_strategy(text)]


DEFAULT_STRATEGY = get_strategy("default").name
"""What ``default`` stands for: the fewest questions to a complete map that we measured."""


def family(name: str) -> Family:
    """``"random"``, ``"lc"``, ``"qbc"`` or ``"forest"``: which model (if any) scores."""
    return get_strategy(name).family


def uses_closure(name: str) -> bool:
    """True when every pair the closure decides joins the labeled set (``-R``, ``-R+``, CNT)."""
    return get_strategy(name).uses_closure


def needs_model(name: str) -> bool:
    """False for the strategies that never look at a classifier (Random, Random-R, CNT)."""
    return get_strategy(name).needs_model
