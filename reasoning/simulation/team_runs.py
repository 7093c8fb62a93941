"""Many team runs: the tasks of ``sporal simulate --mode coverage --policy ...``, written as
each one finishes, and skipped on ``--resume`` once written.

Every finished run is one line of ``runs.jsonl`` in the output folder (its ``coverage.csv``
row and its curves); ``coverage.csv``, ``coverage.md`` and ``coverage.png`` are written again
from every line after each domain (:mod:`~reasoning.simulation.team_report`). A run with
the perfect annotator (``trust`` at noise 0: the answers one annotator who never errs needs)
joins every repeat as the reference of the targets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reasoning.consensus.asking import CHECK_RATE, SECOND_OPINION_VALUE, AskPolicy
from reasoning.simulation.coverage import first_reaching
from reasoning.simulation.coverage_report import COVERAGE_FIELDS, SHARES
from reasoning.simulation.oracle import NOISE_MODELS, Team
from reasoning.simulation.runs import cached_domain, choose_domains, run_tasks
from reasoning.simulation.team_report import write_reports
from reasoning.simulation.teams import POLICIES, TeamRun, run_team
from reasoning.strategies import get_strategy

__all__ = ["RUNS_FILE", "TEAM_FIELDS", "TeamTask", "parse_team", "simulate_teams"]

TEAM_FIELDS = COVERAGE_FIELDS + (
    "policy", "noise", "noise_model", "annotators", "answers", "wrong_pairs", "error_rate",
    "positive_f1", "second_opinions", "disagreements", "checks")
"""The columns of a team run's ``coverage.csv``: the coverage columns (``q50 … q100`` in
answers), then the team's and the policy's."""

RUNS_FILE = "runs.jsonl"


def _spelled(values: Sequence) -> str:
    """One value when all are equal, else the comma list."""
    items = [str(v) for v in values]
    return items[0] if len(set(items)) == 1 else ",".join(items)


def parse_team(noise: str, annotators: int, models: str = "independent"
               ) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """The noise and the noise model per annotator: one value for all, or a comma list.

    Examples
    --------
    >>> parse_team("0.05,0.15", 2, "direct")
    ((0.05, 0.15), ('direct', 'direct'))
    """
    levels = [float(x) for x in str(noise).split(",") if x.strip()]
    kinds = [m.strip() for m in models.split(",") if m.strip()]
    if annotators < 1:
        raise ValueError("a team needs at least one annotator")
    levels = levels * annotators if len(levels) == 1 else levels
    kinds = kinds * annotators if len(kinds) == 1 else kinds
    if len(levels) != annotators or len(kinds) != annotators:
        raise ValueError(f"--noise and --noise-model take one value or {annotators}")
    if any(not 0 <= x <= 1 for x in levels):
        raise ValueError("noise levels lie in [0, 1]")
    unknown = sorted(set(kinds) - set(NOISE_MODELS))
    if unknown:
        raise ValueError(f"unknown noise model(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(NOISE_MODELS)}")
    return tuple(levels), tuple(kinds)


@dataclass(frozen=True)
class TeamTask:
    """One team run: a policy, a team, a repeat of a domain read from ``folder``."""

    folder: str
    domain: str
    strategy: str
    policy: str
    noise: tuple[float, ...]
    models: tuple[str, ...]
    repeat: int
    seed: int
    check_rate: float = CHECK_RATE
    threshold: float = SECOND_OPINION_VALUE

    @property
    def key(self) -> str:
        """What identifies the run in ``runs.jsonl`` (``--resume`` skips a key written)."""
        return "|".join([self.domain, self.strategy, self.policy, _spelled(self.noise),
                         _spelled(self.models), str(self.repeat), str(self.seed),
                         f"{self.check_rate:g}", f"{self.threshold:g}"])

    def run(self) -> TeamRun:
        domain = cached_domain(self.folder, self.domain)
        pairs = domain.index_pairs()
        team = Team.build(pairs, domain.labels, self.noise, self.models, seed=self.seed,
                          repeat=self.repeat)
        return run_team(pairs, domain.features, domain.labels, len(domain.concepts), team,
                        self.policy, strategy=self.strategy, repeat=self.repeat,
                        seed=self.seed, ask=AskPolicy(self.check_rate, self.threshold))

    def row(self, run: TeamRun) -> dict:
        """The ``coverage.csv`` row of this task's result."""
        row: dict = {"domain": self.domain, "strategy": self.strategy, "repeat": self.repeat,
                     "pool": run.pool}
        for share, key in zip(SHARES, COVERAGE_FIELDS[4:], strict=True):
            q = first_reaching(run.decided, run.pool, share)
            row[key] = "" if q is None else q
        row.update(policy=self.policy, noise=_spelled(self.noise),
                   noise_model=_spelled(self.models), annotators=len(self.noise),
                   answers=run.answers, wrong_pairs=run.wrong_pairs,
                   error_rate=run.wrong_pairs / run.pool if run.pool else 0.0,
                   positive_f1=run.positive_f1,
                   second_opinions=run.reasons.get("second-opinion", 0),
                   disagreements=run.reasons.get("disagreement", 0),
                   checks=run.reasons.get("check", 0))
        return row


def _read_runs(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:  # a line cut short by a stopped run: run it again
            continue
    return lines


def _tasks(folder: Path, name: str, policies: list[str], noise, models, *, repeats: int,
           seed: int, strategy: str, ask: AskPolicy) -> list[TeamTask]:
    reference = [TeamTask(str(folder), name, strategy, "trust", (0.0,) * len(noise),
                          ("independent",) * len(noise), r, seed, ask.check_rate,
                          ask.threshold) for r in range(repeats)]
    mine = [TeamTask(str(folder), name, strategy, p, noise, models, r, seed, ask.check_rate,
                     ask.threshold) for r in range(repeats) for p in policies]
    return list({t.key: t for t in reference + mine}.values())


def simulate_teams(data: str | Path, out: str | Path, *, domain: str = "all",
                   policies: str = "trust,double,consensus", noise: str = "0.1",
                   annotators: int = 5, noise_model: str = "independent",
                   strategy: str = "default", repeats: int = 8, seed: int = 0, jobs: int = 0,
                   resume: bool = False, progress: bool = True, quick: bool = False,
                   ask: AskPolicy | None = None) -> Path:
    """Run every (domain, policy, repeat) of a team and write the tables (module docstring).

    Without ``resume`` an earlier ``runs.jsonl`` in ``out`` is replaced; with it, the runs it
    holds are kept and not run again (so several teams can share one folder).
    """
    folder, out = Path(data), Path(out)
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown or not chosen:
        raise ValueError(f"unknown policy {', '.join(unknown) or '(none)'}; "
                         f"valid: {', '.join(POLICIES)}")
    levels, kinds = parse_team(noise, annotators, noise_model)
    strategy = get_strategy(strategy).name
    repeats = min(repeats, 2) if quick else repeats
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    names = choose_domains(folder, domain, quick)
    ask = ask or AskPolicy()
    jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUNS_FILE
    if not resume:
        path.write_text("", encoding="utf-8")
    for name in names:
        done = {line["key"] for line in _read_runs(path)}
        tasks = [t for t in _tasks(folder, name, chosen, levels, kinds, repeats=repeats,
                                   seed=seed, strategy=strategy, ask=ask) if t.key not in done]

        def write(task: TeamTask, run: TeamRun, seconds: float) -> None:
            line = {"key": task.key, "row": task.row(run), "seconds": round(seconds, 2),
                    "decided": run.decided, "wrong": run.wrong}
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")

        run_tasks(tasks, jobs, name, progress, on_result=write)
        write_reports(out, _read_runs(path), TEAM_FIELDS)
    return out
