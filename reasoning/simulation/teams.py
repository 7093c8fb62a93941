"""A team of noisy annotators to a complete map: what each policy costs in answers and errors.

One run asks a :class:`~reasoning.simulation.oracle.Team` about the pool of a domain until no
annotator gets a question, under one policy:

* ``trust`` (the service's ``strict``): the first answer on a pair is asserted;
* ``double`` (a baseline): every pair to two annotators, a third when they disagree, the
  majority asserted;
* ``consensus`` / ``consensus-unweighted``: every answer kept, the labels are the consensus
  (:func:`reasoning.consensus.consensus`, with or without reliability weights) and the
  questions come from :class:`reasoning.consensus.asking.AskPolicy`: new pairs by the
  strategy, disagreements, second opinions by value of information, check questions;
  ``consensus-nocheck``: the same without check questions (what detecting them buys); the
  other ``consensus-*`` names of :data:`CONSENSUS_VARIANTS` change one field of the policy
  (the stake rule, the prior on the accuracies) so that variants run side by side.

Each question goes to the next annotator, round-robin, among those who have not answered that
pair. The :data:`~reasoning.simulation.loop.SEED_QUERIES` seed rows of the repeat come first,
then the strategy's choices. A run measures the answers (check questions and seed questions
included) and, after every answer, the pool pairs decided and the pool pairs wrong (undecided
ones count as wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from reasoning.closure import Closure
from reasoning.consensus import Vote, consensus
from reasoning.consensus.asking import (
    AskPolicy,
    Choice,
    TeamView,
    covering_stake,
    now_stake,
)
from reasoning.simulation.coverage import coverage_seeds
from reasoning.simulation.loop import Chooser, fit_chooser
from reasoning.simulation.oracle import Team
from reasoning.strategies import (
    ALL_STRATEGIES,
    Strategy,
    get_strategy,
    model_inputs,
    model_outputs,
    select,
)

__all__ = ["CONSENSUS_VARIANTS", "POLICIES", "ConsensusVariant", "TeamRun", "run_team"]


@dataclass(frozen=True)
class ConsensusVariant:
    """A ``consensus`` policy: reliability weights or not, and the :class:`AskPolicy` fields
    it sets on the run's policy (the rest, e.g. ``--second-opinion-value``, kept)."""

    weighted: bool = True
    fields: Mapping[str, Any] = field(default_factory=dict)

    def policy(self, ask: AskPolicy) -> AskPolicy:
        """``ask`` with this variant's fields."""
        return replace(ask, **self.fields) if self.fields else ask


CONSENSUS_VARIANTS: dict[str, ConsensusVariant] = {
    "consensus": ConsensusVariant(),
    "consensus-unweighted": ConsensusVariant(weighted=False),
    "consensus-nocheck": ConsensusVariant(fields={"check_rate": 0.0}),
    "consensus-covering": ConsensusVariant(fields={"stake": covering_stake}),
    "consensus-now": ConsensusVariant(fields={"stake": now_stake}),
    "consensus-now-unweighted": ConsensusVariant(weighted=False, fields={"stake": now_stake}),
    "consensus-prior": ConsensusVariant(fields={"prior_answers": 20.0}),
    "consensus-now-prior": ConsensusVariant(fields={"stake": now_stake, "prior_answers": 20.0}),
    "consensus-now-lean": ConsensusVariant(fields={"stake": now_stake, "threshold": 0.5}),
}
"""The consensus policies by name: the default, without weights, without check questions,
the stake of a label as the pool pairs resting on it now (``-now``; ``-covering``: on the
positive labels only, the covering pairs), and the accuracies drawn towards the prior by 20
answers' worth (``-prior``); ``-now-lean``: the stake now with a second opinion only from
0.5 expected wrong pool pairs (the threshold, tuned, instead of ``--second-opinion-value``);
``-now-unweighted``: the stake now, every annotator taken as equally reliable."""

POLICIES = ("trust", "double", *CONSENSUS_VARIANTS)

Pair = tuple[Hashable, Hashable]

_SALT = 6151
"""Mixed into a team run's seeds (tie-breaks, models, check draws)."""


@dataclass
class TeamRun:
    """What one team run gives: per answer the decided and the wrong pool pairs, the
    questions by reason, and the final errors; under ``consensus``, every answer in order
    (``votes``: a checkpoint's consensus is that of a prefix) and the model's P(positive) of
    each pair when the strategy chose it new (``asked``: what P(wrong) reads, as the
    service's ``asked``)."""

    pool: int
    decided: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    positive_f1: float = 0.0
    votes: list[Vote] = field(default_factory=list)
    asked: dict[Pair, float] = field(default_factory=dict)

    @property
    def answers(self) -> int:
        return len(self.decided)

    @property
    def wrong_pairs(self) -> int:
        return self.wrong[-1] if self.wrong else self.pool


def positive_f1(values: np.ndarray, truth: np.ndarray) -> float:
    """F1 of the positive pairs; an undecided pair counts as the wrong value.

    Examples
    --------
    >>> positive_f1(np.array([1, 0, -1]), np.array([True, False, True]))
    0.6666666666666666
    """
    predicted = np.where(values < 0, ~truth, values == 1)
    tp = int((predicted & truth).sum())
    fp = int((predicted & ~truth).sum())
    fn = int((~predicted & truth).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


class _Run:
    """The state of one run: the closure, the pool's values, the answers, the curves."""

    def __init__(self, pairs, X, truth, n: int, team: Team, strategy: Strategy, *,
                 seed: int, repeat: int) -> None:
        self.pairs, self.truth, self.n, self.team = pairs, truth, n, team
        self.rows = {(int(a), int(b)): r for r, (a, b) in enumerate(pairs.tolist())}
        self.closure = Closure(range(n))
        self.values = np.full(len(pairs), -1, dtype=np.int8)
        self.out = TeamRun(len(pairs))
        self.seeds = [int(r) for r in coverage_seeds(len(pairs), seed=seed, repeat=repeat)]
        select_seq, model_seq, draw_seq = np.random.SeedSequence(
            [seed, repeat, ALL_STRATEGIES.index(strategy.name), _SALT]).spawn(3)
        self.chooser = Chooser(strategy, np.asarray(X, dtype=np.float64),
                               np.random.default_rng(select_seq),
                               int(model_seq.generate_state(1)[0]))
        self.draws = np.random.default_rng(draw_seq)
        self.turn = 0
        self.proba: dict[Pair, float] = {}
        self.last_proba: np.ndarray | None = None

    def refresh(self) -> int:
        """Read the pool's values from the closure; the newly decided count."""
        before = int((self.values >= 0).sum())
        self.values = self.closure.values_by_index(self.pairs[:, 0], self.pairs[:, 1])
        return int((self.values >= 0).sum()) - before

    def record(self, reason: str) -> None:
        """Count one answer: the decided and wrong pool pairs after it."""
        self.out.decided.append(int((self.values >= 0).sum()))
        wrong = (self.values < 0) | ((self.values == 1) != self.truth)
        self.out.wrong.append(int(wrong.sum()))
        self.out.reasons[reason] = self.out.reasons.get(reason, 0) + 1

    def next_row(self, answered: np.ndarray | None = None) -> int | None:
        """The next new pool row: a seed row not decided yet, else the strategy's choice
        (never a row ``answered`` marks: a tie left undecided is asked as a disagreement)."""
        while self.seeds:
            row = self.seeds.pop(0)
            if self.values[row] < 0 and (answered is None or not answered[row]):
                return row
        candidates = self.values < 0
        if answered is not None:
            candidates &= ~answered
        if not candidates.any():
            return None
        chooser, strategy = self.chooser, self.chooser.strategy
        model = fit_chooser(chooser, self.pairs, self.values)
        outputs = None
        if model is not None:
            inputs = model_inputs(strategy.family, self.pairs, chooser.X, self.values)
            outputs = model_outputs(strategy.family, model, inputs)
        chosen = select(strategy, closure=self.closure, pool=self.pairs, X=chooser.X,
                        candidates=candidates, outputs=outputs, random_state=chooser.rng)
        row = int(chosen.rows[0])
        if outputs is not None and outputs.proba is not None:
            self.last_proba = outputs.proba
            self.proba[(int(self.pairs[row, 0]), int(self.pairs[row, 1]))] = float(
                outputs.proba[row])
        return row

    def rotate(self, eligible: Callable[[int], bool]) -> int | None:
        """The next annotator, round-robin, for whom ``eligible``; the turn moves past them."""
        k = len(self.team)
        for step in range(k):
            member = (self.turn + step) % k
            if eligible(member):
                self.turn = (member + 1) % k
                return member
        return None

    def finish(self) -> TeamRun:
        self.out.positive_f1 = positive_f1(self.values, self.truth)
        self.out.asked = dict(self.proba)
        return self.out


def _run_trust(run: _Run) -> None:
    while (row := run.next_row()) is not None:
        member = run.rotate(lambda _: True)
        assert member is not None
        value = run.team.answer(row, member)
        run.closure.add_label(int(run.pairs[row, 0]), int(run.pairs[row, 1]), value)
        run.refresh()
        run.record("new")


def _not_in(asked: list[int]) -> Callable[[int], bool]:
    return lambda member: member not in asked


def _more(votes: list[bool]) -> bool:
    """``double`` asks again: fewer than two answers, or two that disagree."""
    return len(votes) < 2 or (len(votes) == 2 and votes[0] != votes[1])


def _run_double(run: _Run) -> None:
    reasons = ("new", "second-opinion", "disagreement")
    while (row := run.next_row()) is not None:
        asked: list[int] = []
        votes: list[bool] = []
        while _more(votes):
            member = run.rotate(_not_in(asked))
            if member is None:
                break
            asked.append(member)
            votes.append(run.team.answer(row, member))
            if _more(votes):  # the pair stays undecided until the last answer
                run.record(reasons[len(votes) - 1])
        value = votes[0] if len(votes) < 3 else sum(votes) >= 2
        run.closure.add_label(int(run.pairs[row, 0]), int(run.pairs[row, 1]), value)
        run.refresh()
        run.record(reasons[len(votes) - 1])


class _Consensus:
    """The ``consensus`` policy of one run: every answer kept, the consensus recomputed when
    an answer lands on a decided pair (a second opinion, a disagreement, a check)."""

    def __init__(self, run: _Run, weighted: bool, policy: AskPolicy) -> None:
        self.run, self.weighted, self.policy = run, weighted, policy
        self.answers: list[Vote] = []
        self.by_pair: dict[Pair, list[Vote]] = {}
        self.pending: int | None = None
        self.stake: dict[Pair, int] = {}
        self.answered = np.zeros(len(run.pairs), dtype=bool)
        result = consensus([], range(run.n), weighted=weighted)
        run.closure = result.closure if result.closure is not None else Closure(range(run.n))
        self.view = TeamView(result, self.by_pair, set(run.rows), run.proba, self.stake)

    def new_pair(self) -> tuple[int, int] | None:
        run = self.run
        if self.pending is None or run.values[self.pending] >= 0 or self.answered[self.pending]:
            self.pending = run.next_row(self.answered)
        if self.pending is None:
            return None
        return int(run.pairs[self.pending, 0]), int(run.pairs[self.pending, 1])

    def choose(self) -> tuple[int, Choice] | None:
        """The next annotator, round-robin, who gets a question, and the question."""
        run = self.run
        k = len(run.team)
        for step in range(k):
            member = (run.turn + step) % k
            choice = self.policy.choose(self.view, run.team.names[member],
                                        draw=float(run.draws.random()), new_pair=self.new_pair)
            if choice is not None:
                run.turn = (member + 1) % k
                return member, choice
        return None

    def ask(self, member: int, choice: Choice) -> None:
        run = self.run
        pair = (cast(int, choice.a), cast(int, choice.b))
        row = run.rows[pair]
        name = run.team.names[member]
        answer = Vote(pair[0], pair[1], run.team.answer(row, member), name,
                        check=choice.check, order=len(self.answers))
        self.answers.append(answer)
        self.answered[row] = True
        self.by_pair.setdefault(pair, []).append(answer)
        result = self.view.result
        if run.values[row] < 0 and len(self.by_pair[pair]) == 1:  # a new pair: no dispute
            run.closure.add_label(pair[0], pair[1], answer.positive)
            self.stake[pair] = max(run.refresh(), 1)
            result.labels[pair] = result.values[pair] = answer.positive
            result.confidence[pair] = result.accuracy.get(name, 0.9)
        else:
            result = consensus(self.answers, range(run.n), weighted=self.weighted)
            self.view.result = result
            run.closure = result.closure if result.closure is not None else Closure(range(run.n))
            run.refresh()
        run.record("check" if choice.check else choice.reason)

    def run_all(self) -> None:
        while (found := self.choose()) is not None:
            self.ask(*found)
        self.run.out.votes = self.answers


def run_team(pairs, X, truth, n: int, team: Team, policy: str, *,
             strategy: Strategy | str = "default", repeat: int = 0, seed: int = 0,
             ask: AskPolicy | None = None) -> TeamRun:
    """One run of ``team`` under ``policy`` (one of :data:`POLICIES`) until no annotator gets
    a question (module docstring).

    Parameters
    ----------
    pairs : array of shape (m, 2)
        The pool as concept indices in ``range(n)``.
    X : array of shape (m, f)
        Features of the pool pairs (for the strategy's model).
    truth : bool array of shape (m,)
    n : int
    team : Team
    policy : str
    strategy : Strategy or str
        Chooses the new pairs (default: the default strategy).
    repeat, seed : int
        The seed questions, the strategy's tie-breaks and model, and the check draws.
    ask : AskPolicy, optional
        The consensus policy's question choice (default: :class:`AskPolicy`).
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(POLICIES)}")
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    run = _Run(pairs, X, np.asarray(truth, dtype=bool), n, team, get_strategy(strategy),
               seed=seed, repeat=repeat)
    if policy == "trust":
        _run_trust(run)
    elif policy == "double":
        _run_double(run)
    else:
        variant = CONSENSUS_VARIANTS[policy]
        _Consensus(run, variant.weighted, variant.policy(ask or AskPolicy())).run_all()
    return run.finish()
