"""The ask loop both modes of the simulation share: a strategy chooses, an oracle answers.

:class:`Asking` is what one run knows: the oracle's answers and, when it keeps one, their
closure. :func:`ask_by_strategy` is the loop: fit the strategy's model on what the strategy
learns from, let it choose an undecided pool row, ask the oracle, repeat. The modes differ only
in what they measure and when they stop (:mod:`reasoning.simulation.auc`,
:mod:`reasoning.simulation.coverage`).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from reasoning.closure import Closure
from reasoning.simulation.oracle import Oracle
from reasoning.strategies import Strategy, fit_model, model_inputs, select

__all__ = ["SEED_QUERIES", "Asking", "Chooser", "Question", "ask_by_strategy", "fit_chooser"]

SEED_QUERIES = 20
"""Random pool pairs asked before the strategy takes over (the paper's 20)."""


@dataclass(frozen=True)
class Question:
    """A question the strategy chose: its number in the run (from 0), the pool row, the pair."""

    i: int
    row: int
    a: int
    b: int


class Asking:
    """The answers of one run so far, and their closure when the run keeps one.

    Parameters
    ----------
    pool : int array of shape (m, 2)
        The pool as concept indices in ``range(n)``.
    oracle : Oracle
    n : int
        The number of concepts.
    keep_closure : bool
        Add every answer to a closure (the strategies that use it need one; the coverage
        measure keeps one for every strategy, to count what is decided).

    Attributes
    ----------
    answers : int8 array of shape (m,)
        The oracle's answer per asked row (1, 0), -1 where not asked.
    values : int8 array of shape (m,)
        The closure's value of every pool row (the answers without a closure).
    decided : list of int
        The decided pool rows after each question.
    closure_seconds : float
        The time spent adding answers to the closure.
    """

    def __init__(self, pool: np.ndarray, oracle: Oracle, n: int, *, keep_closure: bool) -> None:
        self.pool, self.oracle = pool, oracle
        self.closure = Closure(range(n)) if keep_closure else None
        self.answers = np.full(len(pool), -1, dtype=np.int8)
        self.values = self.answers if self.closure is None else self.answers.copy()
        self.decided: list[int] = []
        self.closure_seconds = 0.0

    def ask(self, row: int) -> None:
        """Ask the oracle about ``row`` and add the answer."""
        answer = self.oracle.answer(row)
        self.answers[row] = answer
        if self.closure is not None and self.values[row] < 0:  # else it decides nothing new
            a, b = int(self.pool[row, 0]), int(self.pool[row, 1])
            start = time.perf_counter()
            self.closure.add_label(a, b, answer)
            self.closure_seconds += time.perf_counter() - start
            self.values = self.closure.values_by_index(self.pool[:, 0], self.pool[:, 1])
        self.decided.append(int((self.values >= 0).sum()))

    def known(self, strategy: Strategy) -> np.ndarray:
        """What ``strategy`` learns from and never asks again (1, 0; -1 open): the closure's
        values for a strategy that uses the closure, else its answers."""
        return self.values if strategy.uses_closure else self.answers

    @property
    def complete(self) -> bool:
        """True when every pool pair is decided."""
        return bool((self.values >= 0).all())


@dataclass(frozen=True)
class Chooser:
    """A strategy with what it needs to choose: the pool's features, its seeds, its model.

    ``rng`` breaks ties (a generator, consumed as the run goes), ``model_seed`` seeds every
    model fit; ``estimator`` replaces the family's default model; with ``model_lag=N`` the
    strategy chooses with the model trained ``N`` questions earlier.
    """

    strategy: Strategy
    X: np.ndarray
    rng: np.random.Generator
    model_seed: int
    estimator: object = None
    model_lag: int = 0


def ask_by_strategy(asking: Asking, chooser: Chooser, *, queries: float = math.inf,
                    until_complete: bool = False,
                    before: Callable[[int], None] | None = None,
                    log: list[Question] | None = None) -> None:
    """Let the strategy ask up to ``queries`` questions.

    Each step ``t = 0, 1, …`` first calls ``before(t)``, then stops at ``t == queries`` (or,
    with ``until_complete``, once every pool pair is decided); else, while some row is open
    to the strategy, it fits the model on what the strategy knows, chooses a row and asks the
    oracle (a step with no open row asks nothing). ``log`` receives every chosen question.
    """
    strategy, pool = chooser.strategy, asking.pool
    models: deque = deque(maxlen=chooser.model_lag + 1)  # models[0]: model_lag questions ago
    step = 0
    while True:
        if before is not None:
            before(step)
        if step >= queries or (until_complete and asking.complete):
            return
        known = asking.known(strategy)
        candidates = known < 0
        if candidates.any():
            models.append(fit_chooser(chooser, pool, known))
            chosen = select(strategy, closure=asking.closure if strategy.uses_closure else None,
                            pool=pool, X=chooser.X, candidates=candidates, model=models[0],
                            random_state=chooser.rng)
            row = int(chosen.rows[0])
            if log is not None:
                log.append(Question(len(log), row, int(pool[row, 0]), int(pool[row, 1])))
            asking.ask(row)
        step += 1


def fit_chooser(chooser: Chooser, pool: np.ndarray, known: np.ndarray):
    """The strategy's model fitted on the rows it knows (None: it needs none, or cannot)."""
    strategy = chooser.strategy
    if not strategy.needs_model:
        return None
    labeled = known >= 0
    inputs = model_inputs(strategy.family, pool, chooser.X, known)
    return fit_model(strategy.family, inputs[labeled], known[labeled],
                     random_state=chooser.model_seed, estimator=chooser.estimator)
