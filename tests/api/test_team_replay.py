"""A simulated team replayed through the service asks the same team questions.

``sporal simulate --policy consensus`` and ``GET /next`` in a ``consensus`` project share one
:class:`~reasoning.consensus.asking.AskPolicy`; this replays one small simulated team (its
questions, its annotators' answers, its check draws) through the service and checks that at
every step the service asks that annotator the same disagreement, second opinion or check
question as the simulation did. The simulation's new pairs are answered as they are: the two
choose them with different tie-breaks, so ``next``'s own new pair is not compared. The strategy
fits no model (``Random-R``), so P(wrong) rests on the answers alone in both.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import app.services.asking as asking
from benchmarks.team_http import write_domain
from reasoning.consensus.asking import (
    AskPolicy,
    Choice,
    StakeRule,
    TeamView,
    asked_stake,
    now_stake,
)
from reasoning.data import load_domain
from reasoning.simulation.oracle import Team
from reasoning.simulation.teams import run_team
from tests.api.conftest import label, new_project

STRATEGY = "Random-R"


@dataclass(frozen=True)
class _Recording(AskPolicy):
    """The policy, logging each question it chooses with the draw it used and (``snapshot``)
    a copy of the view it chose on."""

    log: list[tuple[str | None, float, Choice | None, TeamView | None]] = field(
        default_factory=list, compare=False)
    snapshot: bool = True
    every: bool = False

    def choose(self, view: TeamView, annotator: str | None, *, draw: float = 1.0,
               new_pair: Callable[[], tuple[Hashable, Hashable] | None] = lambda: None
               ) -> Choice | None:
        copied = copy.deepcopy(view) if self.snapshot else None
        choice = super().choose(view, annotator, draw=draw, new_pair=new_pair)
        if choice is not None or self.every:
            self.log.append((annotator, draw, choice, copied))
        return choice


def _simulated(folder: Path, noise: float, repeat: int, stake: StakeRule):
    domain = load_domain(folder, "tiny")
    pairs = domain.index_pairs()
    team = Team.build(pairs, domain.labels, (noise,) * 4, ("independent",) * 4, seed=0,
                      repeat=repeat)
    policy = _Recording(stake=stake)
    run_team(pairs, domain.features, domain.labels, len(domain.concepts), team, "consensus",
             strategy=STRATEGY, repeat=repeat, ask=policy)
    return domain, team, policy.log


def _explained(simulated: TeamView, served: TeamView, index: dict[int, int], name: str,
               draw: float, rule: StakeRule) -> Choice | None:
    """What the simulation would have asked with the service's stakes and accuracies (the
    two known differences, module docstring), in the service's concept ids."""
    def back(pair: tuple[Hashable, Hashable]) -> tuple[int, int]:
        return index[int(pair[0])], index[int(pair[1])]

    stake = {back(p): v for p, v in served.stakes().items()}
    result = replace(simulated.result, accuracy=dict(served.result.accuracy))
    choice = AskPolicy(stake=rule).choose(replace(simulated, result=result, stake=stake), name,
                                          draw=draw)
    if choice is None:
        return None
    ids = {v: k for k, v in index.items()}
    return replace(choice, a=ids[int(choice.a)], b=ids[int(choice.b)])


@pytest.mark.parametrize(("seed", "repeat", "rule"), [
    (0, 0, now_stake), (2, 1, now_stake), (0, 0, asked_stake)],
    ids=["now-0", "now-1", "asked-0"])
def test_the_service_asks_a_replayed_team_what_the_simulation_asked(
        client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        seed: int, repeat: int, rule: StakeRule) -> None:
    """With the service's stake rule (the pool pairs resting on a label now) and with the
    stake its answer decided."""
    folder = write_domain(tmp_path, "tiny", 12, 50, seed=seed)
    domain, team, log = _simulated(folder, 0.25, repeat, rule)
    team_asked = [c for _, _, c, _ in log if c is not None and (c.reason != "new" or c.check)]
    assert len(team_asked) >= 5, "the team should have asked second opinions or checks"
    pid = new_project(client, domain.concepts,
                      [(a, b, x) for (a, b), x in zip(domain.pairs, domain.features.tolist(),
                                                      strict=True)], policy="consensus")
    ids = {c["name"]: c["id"] for c in client.get(
        f"/projects/{pid}/concepts", params={"limit": 1000}).json()["items"]}
    index = {ids[c]: k for k, c in enumerate(domain.concepts)}
    served = _Recording(every=True, stake=rule)
    monkeypatch.setattr(asking, "POLICY", served)
    draw = [1.0]
    monkeypatch.setattr(asking, "check_draw", lambda *_: draw[0])
    rows = {(int(a), int(b)): r for r, (a, b) in enumerate(domain.index_pairs().tolist())}
    same = explained = compared = 0
    fast = True  # every answer so far took the fast path (a new pair): no consensus refit
    for step, (name, drawn, choice, view) in enumerate(log):
        assert choice is not None and view is not None and name is not None
        draw[0] = drawn
        asked = client.get(f"/projects/{pid}/next", params={
            "annotator": name, "k": 1, "fresh": "true", "strategy": STRATEGY})
        assert asked.status_code == 200, asked.text
        if fast:  # then both count a label's stake as the pool pairs its answer decided
            stakes = {(index[int(x)], index[int(y)]): v  # type: ignore[call-overload]
                      for (x, y), v in served.log[-1][3].stakes().items()}
            assert stakes == dict(view.stakes()), f"step {step}"
            compared += 1
        fast = fast and choice.reason == "new" and not choice.check
        a, b = domain.concepts[int(choice.a)], domain.concepts[int(choice.b)]
        if choice.reason != "new" or choice.check:
            mine = served.log[-1]
            assert mine[0] == name and mine[3] is not None
            if mine[2] == replace(choice, a=ids[a], b=ids[b]):
                same += 1
            else:  # the service's stakes and accuracies, given to the simulation, explain it
                assert mine[2] == _explained(view, mine[3], index, name, drawn, rule), \
                    f"step {step}"
                explained += 1
        row = rows[(int(choice.a), int(choice.b))]
        value = team.answer(row, team.names.index(name))
        posted = label(client, pid, a, b, "positive" if value else "negative", annotator=name)
        assert posted.status_code == 201, posted.text
        assert posted.json().get("check_failed", False) is (choice.check and not value)
    assert compared >= 10 and same >= 0.8 * (same + explained), (compared, same, explained)
