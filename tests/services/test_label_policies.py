"""The label policies: one registry that the schema's names match, changes as values, and the
one closure diff checked against the pairs' values read one by one."""

from __future__ import annotations

import itertools
from typing import get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from app.schemas import PolicyName
from app.services.labels.change import NewAnswer, TeamChange
from app.services.labels.policy import DEFAULT_POLICY, POLICIES
from app.services.labels.shared import closure_diff
from app.services.state import ProjectState
from reasoning.closure import Closure, ContradictionError


def test_the_registry_holds_every_policy_a_client_may_name() -> None:
    assert list(POLICIES) == list(get_args(PolicyName))
    assert DEFAULT_POLICY in POLICIES
    for name, policy in POLICIES.items():
        assert policy.name == name
        for method in ("post", "post_bulk", "retract_label", "retract_answer",
                       "team_question", "adopt"):
            assert callable(getattr(policy, method)), (name, method)
    assert [policy.refuses for policy in POLICIES.values()] == [True, False]


def test_a_change_gives_its_answers_to_the_consensus_after_every_stored_one() -> None:
    change = TeamChange(add=(NewAnswer(1, 2, True, "ann", check=7),
                             NewAnswer(1, 2, False, "rev", role="reviewer")))
    votes = change.votes()
    assert [(v.a, v.b, v.positive, v.annotator, v.reviewer, v.check) for v in votes] == [
        (1, 2, True, "ann", False, True), (1, 2, False, "rev", True, False)]
    assert votes[0].order < votes[1].order and votes[0].order > 2**40


def _closure(n: int, labels: list[tuple[int, int, bool]]) -> Closure:
    closure = Closure()
    for k in range(n):
        closure.add_concept(k)
    for a, b, positive in labels:
        try:
            closure.add_label(a, b, positive)
        except ContradictionError:
            pass
    return closure


label_lists = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.booleans())
                       .filter(lambda t: t[0] != t[1]), max_size=8)


@settings(max_examples=60, deadline=None)
@given(label_lists, label_lists)
def test_the_closure_diff_is_the_pairs_whose_value_changed(
        before_labels: list[tuple[int, int, bool]],
        after_labels: list[tuple[int, int, bool]]) -> None:
    n = 6
    before, after = _closure(n, before_labels), _closure(n, after_labels)
    state = ProjectState(1)
    state.name_of = {k: f"c{k}" for k in range(n)}
    diff = closure_diff(state, before, after)
    pairs = list(itertools.permutations(range(n), 2))
    old = {p: before.status(*p).value for p in pairs}
    new = {p: after.status(*p).value for p in pairs}
    assert diff.n_positive == sum(new[p] is True and old[p] is not True for p in pairs)
    assert diff.n_negative == sum(new[p] is False and old[p] is not False for p in pairs)
    assert diff.n_undecided == sum(old[p] is not None and new[p] != old[p] for p in pairs)
    listed = {(d.a, d.b, d.label) for d in diff.undecided}
    assert listed == {(f"c{a}", f"c{b}", "positive" if old[(a, b)] else "negative")
                      for a, b in pairs if old[(a, b)] is not None and new[(a, b)] != old[(a, b)]}
