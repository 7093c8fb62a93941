"""The simulation: strategies asking an oracle about a labeled domain, measured two ways.

* ``auc`` (:mod:`~reasoning.simulation.auc`): the paper's protocol, the AUC of a forest on
  held-out pairs after each number of questions;
* ``coverage`` (:mod:`~reasoning.simulation.coverage`): the questions until every pool pair
  is decided, against a greedy oracle that knows the truth; with a ``policy``, a team of noisy
  annotators instead (:mod:`~reasoning.simulation.teams`,
  :mod:`~reasoning.simulation.team_runs`): the answers each policy needs and the pairs it
  leaves wrong.

Both run the same ask loop (:mod:`~reasoning.simulation.loop`: the strategy chooses, an
:class:`~reasoning.simulation.oracle.Oracle` answers, the closure keeps what the answers decide)
and the same process-pool driver (:mod:`~reasoning.simulation.runs`). :func:`simulate` is what
``sporal simulate`` runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from reasoning.simulation.auc import (
    FOREST_TREES,
    QUICK,
    Point,
    Profile,
    auc_profile,
    run_strategy,
    simulate_auc,
    split_pool,
)
from reasoning.simulation.coverage import (
    greedy_oracle,
    run_coverage,
    simulate_coverage,
)
from reasoning.simulation.loop import SEED_QUERIES, Question
from reasoning.simulation.oracle import NOISE_MODELS, NoisyAnnotator, Oracle, Team, TruthOracle
from reasoning.simulation.team_runs import simulate_teams
from reasoning.simulation.teams import POLICIES, TeamRun, run_team

__all__ = [
    "FOREST_TREES",
    "MODES",
    "NOISE_MODELS",
    "POLICIES",
    "QUICK",
    "SEED_QUERIES",
    "NoisyAnnotator",
    "Oracle",
    "Point",
    "Profile",
    "Question",
    "Team",
    "TeamRun",
    "TruthOracle",
    "greedy_oracle",
    "run_coverage",
    "run_strategy",
    "run_team",
    "simulate",
    "simulate_teams",
    "split_pool",
]

MODES = ("auc", "coverage")


def _simulate_team(data: str | Path, out: str | Path, mode: str,
                   strategies: str | Iterable[str], team: dict, **common) -> Path:
    """A team of noisy annotators: coverage mode, one strategy (``all``: the default)."""
    if mode != "coverage":
        raise ValueError("a team of annotators needs mode 'coverage'")
    chosen = strategies if isinstance(strategies, str) else ",".join(strategies)
    if "," in chosen:
        raise ValueError("a team run takes one strategy")
    strategy = "default" if chosen.strip().lower() == "all" else chosen
    return simulate_teams(data, out, strategy=strategy, **common, **team)


def simulate(data: str | Path, out: str | Path, domain: str = "all",
             strategies: str | Iterable[str] = "all", repeats: int = 20,
             queries: int | None = 150, eval_every: int = 10, seed: int = 0, jobs: int = 0,
             quick: bool = False, progress: bool = True, model_lag: int = 0,
             mode: str = "auc", log_questions: bool = False, team: dict | None = None
             ) -> Path:
    """Run the simulation and write its tables and plots into ``out``.

    Parameters
    ----------
    data : path
        Folder with ``DOMAIN.pairs`` and ``DOMAIN.features``.
    out : path
        Created if missing.
    domain : str
        A domain name, a comma list, or ``"all"``.
    strategies : str or iterable of str
        A comma list of strategy names, or ``"all"``.
    repeats, queries, eval_every, seed : int
        See :func:`~reasoning.simulation.auc.run_strategy`.
    jobs : int
        Worker processes; 0 means every core.
    quick : bool
        Cap the profile at :data:`QUICK` and, for ``domain="all"``, run the smallest domain only.
    progress : bool
        Show a progress bar per domain.
    model_lag : int
        Queries the strategy's model lags behind the labels (see
        :func:`~reasoning.simulation.auc.run_strategy`).
    mode : str
        ``"auc"``: the paper's protocol (:func:`~reasoning.simulation.auc.simulate_auc`).
        ``"coverage"``: ask until every pool pair is decided
        (:func:`~reasoning.simulation.coverage.simulate_coverage`; ``queries`` None means no
        cap, ``eval_every`` and ``model_lag`` do not apply).
    log_questions : bool
        Also write ``questions.csv`` (:data:`~reasoning.simulation.runs.QUESTION_FIELDS`).
    team : dict, optional
        Coverage mode with a team of noisy annotators: the keyword arguments of
        :func:`~reasoning.simulation.team_runs.simulate_teams`; ``strategies`` is then one.

    Returns
    -------
    Path
        The folder ``out``.
    """
    if team is not None:
        return _simulate_team(data, out, mode, strategies, team, domain=domain,
                              repeats=repeats, seed=seed, jobs=jobs, quick=quick,
                              progress=progress)
    if mode == "coverage":
        return simulate_coverage(data, out, domain=domain, strategies=strategies,
                                 repeats=repeats, queries=queries, seed=seed, jobs=jobs,
                                 quick=quick, progress=progress, log_questions=log_questions)
    if mode != "auc":
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    return simulate_auc(data, out, domain=domain, strategies=strategies,
                        profile=auc_profile(repeats, queries, eval_every, quick), seed=seed,
                        jobs=jobs, quick=quick, progress=progress, model_lag=model_lag,
                        log_questions=log_questions)
