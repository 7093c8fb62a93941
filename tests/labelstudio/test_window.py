"""The window's diff without Label Studio or sporal: what a refresh retires, creates and
re-ranks."""

from __future__ import annotations

import random

from sporal_labelstudio.window import Asked, Held, plan_window


def pairs(*names: str) -> list[tuple[str, str]]:
    return [(name, name.upper()) for name in names]


def held(scores: dict[str, float | None], reasons: dict[str, str] | None = None) -> list[Held]:
    return [Held(i, (name, name.upper()), score, (reasons or {}).get(name, "new"))
            for i, (name, score) in enumerate(scores.items())]


def asked(*names: str, reason: str = "new") -> list[Asked]:
    return [Asked(pair, reason) for pair in pairs(*names)]


def test_an_answer_retires_only_the_decided_and_refills_the_free_places() -> None:
    window = held({"a": 0.2, "b": 0.4, "c": 0.6, "d": 0.8})
    # "a" was answered (decided), which decided "c" too; sporal now prefers other questions
    plan = plan_window(window, asked("x", "b", "y", "d", "z"), pairs("a", "c"), 4)
    assert sorted(plan.retire) == [0, 2]
    assert [q.pair for q, _ in plan.create] == pairs("x", "y")
    assert plan.keep == [1, 3]  # the undecided open tasks stay, though not sporal's first
    assert plan.touched == 4 and not plan.rescore


def test_new_tasks_take_their_rank_between_the_held_ones_without_rescoring() -> None:
    plan = plan_window(held({"b": 0.4, "d": 0.8}), asked("x", "b", "y", "d", "z"), [], 5)
    scores = {q.pair[0]: s for q, s in plan.create}
    assert not plan.rescore
    assert 0 < scores["x"] < 0.4 < scores["y"] < 0.8 < scores["z"] < 1


def test_held_tasks_in_another_order_than_sporals_are_ranked_again() -> None:
    plan = plan_window(held({"b": 0.4, "d": 0.8}), asked("d", "b", "x"), [], 3)
    created = {q.pair: s for q, s in plan.create}
    assert set(plan.rescore) == {0, 1}
    assert plan.rescore[1] < plan.rescore[0] < created[("x", "X")]  # d, b, x
    assert all(0 < s < 1 for s in [*plan.rescore.values(), *created.values()])


def test_a_full_window_of_undecided_tasks_changes_nothing() -> None:
    window = held({"a": 0.2, "b": 0.4, "c": 0.6})
    plan = plan_window(window, asked("a", "b", "c", "x"), [], 3)
    assert plan.touched == 0 and not plan.rescore and plan.keep == [0, 1, 2]


def test_second_opinions_and_disagreements_stay_open_while_decided() -> None:
    window = held({"a": 0.2, "b": 0.5}, {"a": "second-opinion", "b": "disagreement"})
    plan = plan_window(window, asked("x"), pairs("a", "b"), 3)
    assert plan.retire == [] and plan.keep == [0, 1]
    assert [(q.pair, q.reason) for q, _ in plan.create] == [(("x", "X"), "new")]


def test_a_pair_already_open_is_not_created_twice() -> None:
    plan = plan_window(held({"a": 0.5}), asked("a", "a", "b"), [], 3)
    assert [q.pair for q, _ in plan.create] == pairs("b")


def test_tasks_without_a_score_are_ranked() -> None:
    plan = plan_window(held({"a": None, "b": 0.3}), asked("b", "a"), [], 2)
    assert plan.rescore[0] > plan.rescore[1]


def test_many_refreshes_keep_every_score_in_order_and_inside_zero_one() -> None:
    rng = random.Random(0)
    names = [f"c{i}" for i in range(400)]
    window: list[Held] = []
    ids = iter(range(10_000))
    for step in range(300):
        ranking = rng.sample(names, 12)
        decided = {t.pair for t in window if rng.random() < 0.2}
        plan = plan_window(window, [Asked((n, n.upper())) for n in ranking], decided, 8)
        kept = [t for t in window if t.task_id in plan.keep]
        window = [Held(t.task_id, t.pair, plan.rescore.get(t.task_id, t.score)) for t in kept]
        window += [Held(next(ids), q.pair, s) for q, s in plan.create]
        scores = [t.score for t in window]
        assert len(window) == 8 and len({t.pair for t in window}) == 8, step
        assert all(s is not None and 0 < s < 1 for s in scores), step
        assert len(set(scores)) == len(scores), step


def test_without_rerank_open_tasks_keep_their_scores_and_new_ones_go_after_them() -> None:
    # sporal now ranks the held tasks the other way round and adds two: nothing is re-scored
    plan = plan_window(held({"a": 0.2, "b": 0.6}), asked("x", "b", "a", "y"), [], 4,
                       rerank=False)
    assert plan.rescore == {}
    scores = {q.pair[0]: s for q, s in plan.create}
    assert 0.6 < scores["x"] < scores["y"] < 1  # after the open ones, in sporal's order
    assert plan_window(held({"a": 0.2, "b": 0.6}), asked("x", "b", "a"), [], 3).rescore
