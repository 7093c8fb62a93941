"""A lead's actions through the services, no HTTP: the stored exclusions and re-asked pairs
are read by every consensus, in this process and in one started after (a restart)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.db import Database, migrate
from app.schemas import LabelIn
from app.security import Caller
from app.services.asking import team_question
from app.services.labels.change import TeamChange, plan_change
from app.services.labels.policy import POLICIES
from app.services.state import StateRegistry
from app.services.team import LiveAnswer, counting, live_answers, votes
from app.services.team_actions import exclude_annotator, include_annotator, reask_annotator
from app.services.training import Trainer
from app.services.unit import ProjectWork, open_project
from app.settings import Settings
from models import Concept, Project
from reasoning.consensus import Vote, consensus
from reasoning.consensus.asking import AskPolicy, TeamView
from tests.api.databases import sqlite_url

ANSWERS = [("c0", "c1", True, "ann"), ("c0", "c1", True, "bo"), ("c0", "c1", False, "bad"),
           ("c1", "c2", True, "ann"), ("c1", "c2", False, "bad"),
           ("c2", "c3", False, "bad"), ("c3", "c4", False, "bad")]


@dataclass
class Process:
    """One worker of the service: its engine, cached states and trainer."""

    database: Database
    registry: StateRegistry
    trainer: Trainer

    @contextmanager
    def work(self, project_id: int) -> Iterator[ProjectWork]:
        with self.database.sessions() as session, open_project(
                ProjectWork, session, self.registry, self.trainer, project_id,
                fresh_timeout=1.0) as work:
            yield work


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("team") / "template.db"
    migrate(sqlite_url(path))
    return path


@pytest.fixture
def start(template: Path, tmp_path: Path) -> Iterator[Callable[[], Process]]:
    """Start processes on one fresh database (each a restart of the service)."""
    path = tmp_path / "team.db"
    shutil.copy(template, path)
    url = sqlite_url(path)
    started: list[Process] = []

    def make() -> Process:
        registry = StateRegistry()
        process = Process(Database(url, Settings(database_url=url)), registry,
                          Trainer(registry))
        started.append(process)
        return process

    yield make
    for process in started:
        process.trainer.close()
        process.database.dispose()


def _team(process: Process) -> int:
    with process.database.sessions() as session, session.begin():
        project = Project(name="team", policy="consensus")
        session.add(project)
        session.flush()
        session.add_all([Concept(project_id=project.id, name=f"c{i}") for i in range(6)])
        project.version += 1
        pid = project.id
    for a, b, positive, who in ANSWERS:
        with process.work(pid) as work:
            POLICIES["consensus"].post(work, LabelIn(a=a, b=b, annotator=who,
                                                     label="positive" if positive
                                                     else "negative"))
    return pid


def _offline(work: ProjectWork, without: set[str]) -> dict[tuple[int, int], bool]:
    rows = [r for r in live_answers(work.session, work.state.project_id)
            if r.annotator not in without]
    return dict(consensus(votes(rows), work.state.closure.concepts).labels)


def test_a_stored_exclusion_holds_for_every_later_consensus_after_a_restart(
        start: Callable[[], Process]) -> None:
    first = start()
    pid = _team(first)
    with first.work(pid) as work:
        assert dict(plan_change(work, TeamChange()).result.labels) == _offline(work, set())
        done = exclude_annotator(work, "bad", Caller("project", pid))
    assert done.changed and done.answers == 4 and done.labels_retracted == 2
    with start().work(pid) as work:  # a restart: nothing cached
        planned = plan_change(work, TeamChange())
        assert planned.excluded == frozenset({"bad"})
        assert {r.annotator for r in planned.left_out} == {"bad"}
        assert dict(planned.result.labels) == _offline(work, {"bad"}) == {
            pair: True for pair, _ in work.state.labels.items()}
        assert team_question(work, "bad", None).pick is None  # no team question for them
        back = include_annotator(work, "bad")
    assert back.changed and back.labels_created == 2
    with start().work(pid) as work:
        assert dict(plan_change(work, TeamChange()).result.labels) == _offline(work, set())


def test_reasked_pairs_reach_the_others_after_a_restart(start: Callable[[], Process]) -> None:
    first = start()
    pid = _team(first)
    with first.work(pid) as work:
        assert reask_annotator(work, "bad").pairs == 2
    with start().work(pid) as work:
        wanted = {(work.state.id_of[a], work.state.id_of[b]) for a, b in
                  (("c2", "c3"), ("c3", "c4"))}
        pick = team_question(work, "ann", None).pick  # ann answered the disputed pair
        assert pick is not None and pick.reason == "second-opinion"
        assert (pick.a, pick.b) in wanted
        mine = team_question(work, "bad", None).pick
        assert mine is None or (mine.a, mine.b) not in wanted


def test_counting_leaves_out_the_excluded_but_never_a_reviewer() -> None:
    rows = [LiveAnswer(k, 1, 2, True, who, reviewer, False, "agreed", None)
            for k, (who, reviewer) in enumerate([("ann", False), ("bad", False),
                                                 ("bad", True), (None, False)], 1)]
    assert [r.id for r in counting(rows, frozenset({"bad"}))] == [1, 3, 4]
    assert counting(rows, frozenset()) == rows


def test_the_policy_asks_a_reasked_pair_before_any_other_second_opinion() -> None:
    given = [Vote("x", "y", True, "ann"), Vote("z", "w", False, "bad")]
    result = consensus(given, "xyzw")
    answers = {(v.a, v.b): [v] for v in given}
    pool = list(answers)
    policy = AskPolicy(threshold=10.0)  # no pair is worth a second opinion by its value
    assert policy.choose(TeamView(result, answers, pool), "bo") is None
    view = TeamView(result, answers, pool, reask=[("z", "w")])
    choice = policy.choose(view, "bo")
    assert choice is not None and (choice.a, choice.b, choice.reason) == (
        "z", "w", "second-opinion")
    assert policy.choose(view, "bad") is None  # they answered it
