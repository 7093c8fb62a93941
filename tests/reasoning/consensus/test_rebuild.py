"""A consensus rebuilt from a full fit's accuracies (no EM) against that full fit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning.closure import Closure, Label
from reasoning.consensus import Consensus, Vote, consensus, rebuild
from reasoning.consensus.incremental import pair_state
from tests.reasoning.consensus.test_incremental import N, _planted


def _closure(fit: Consensus, concepts) -> Closure:
    """The closure of ``fit``'s labels, as a service holds it (asserted in some order)."""
    closure = Closure.closed([Label(a, b, v) for (a, b), v in fit.labels.items()], concepts)
    assert closure is not None
    return closure


def _same(rebuilt: Consensus, full: Consensus, tolerance: float = 1e-3) -> None:
    """Equal on everything a decision reads; the posteriors within ``tolerance``: the EM
    stops after 100 iterations, and on a noisy team (30% wrong) it has not always converged
    by then (measured: up to 6e-4 from the E-step with its final accuracies, 1e-7 with 5,000
    iterations)."""
    assert rebuilt.labels == full.labels
    assert rebuilt.values == full.values
    assert set(rebuilt.gave_way) == set(full.gave_way)
    assert set(rebuilt.tied) == set(full.tied)
    assert set(rebuilt.contested) == set(full.contested)
    for pair, votes in full.contested.items():
        assert set(rebuilt.contested[pair]) == set(votes)
    assert rebuilt.accuracy == full.accuracy
    assert rebuilt.posterior.keys() == full.posterior.keys()
    for pair, post in full.posterior.items():
        assert rebuilt.posterior[pair] == pytest.approx(post, abs=tolerance)
        assert rebuilt.confidence[pair] == pytest.approx(full.confidence[pair], abs=tolerance)


def _enriched(seed: int, eps: float) -> list[Vote]:
    """A planted team's answers with an anonymous annotator, check answers and reviewer
    resolutions (one pair resolved twice, the later standing) mixed in."""
    rng = np.random.default_rng(seed)
    _, answers = _planted(seed, eps=eps)
    out = [Vote(v.a, v.b, v.positive, None if v.annotator == "t4" else v.annotator,
                check=bool(rng.random() < 0.1), order=v.order) for v in answers]
    pairs = sorted({(v.a, v.b) for v in out})
    for k in rng.choice(len(pairs), min(3, len(pairs)), replace=False):
        out.append(Vote(*pairs[k], bool(rng.random() < 0.5), "lead", reviewer=True,
                        order=len(out)))
    out.append(Vote(*pairs[0], not out[-1].positive, "lead", reviewer=True, order=len(out)))
    return out


@pytest.mark.parametrize("eps", [0.1, 0.3])
@pytest.mark.parametrize("seed", range(12))
def test_rebuilt_from_its_own_accuracies_a_full_fit_is_that_fit(seed, eps):
    _, answers = _planted(seed, eps=eps)
    full = consensus(answers, range(N))
    _same(rebuild(full.accuracy, answers, _closure(full, range(N))), full)


@pytest.mark.parametrize("seed", range(8))
def test_reviewers_anonymous_and_check_answers_are_rebuilt_as_consensus_counts_them(seed):
    answers = _enriched(seed, eps=0.25)
    full = consensus(answers, range(N))
    assert full.gave_way or full.contested or full.tied  # the fit has something to rebuild
    _same(rebuild(full.accuracy, answers, _closure(full, range(N))), full)


def test_the_planted_teams_reach_every_kind_of_pair():
    """The cases above are not vacuous: ties, pairs that gave way, contested pairs."""
    fits = [consensus(_planted(seed, eps=0.3)[1], range(N)) for seed in range(12)]
    assert any(f.tied for f in fits) and any(f.gave_way for f in fits)
    assert any(f.contested for f in fits)


@pytest.mark.parametrize("seed", range(6))
def test_consensus_keeps_the_posterior_of_its_last_e_step(seed):
    """``consensus``'s posterior is that of its last E-step, computed with the accuracies
    before its last M-step: on a converged fit (10% wrong) it differs from the E-step with
    its final accuracies by about the EM's tolerance (1e-7), and the rebuild is that E-step."""
    _, answers = _planted(seed, eps=0.1)
    full = consensus(answers, range(N))
    rebuilt = rebuild(full.accuracy, answers, _closure(full, range(N)))
    for pair, post in full.posterior.items():
        exact = pair_state([v for v in answers if (v.a, v.b) == pair], full).posterior
        assert rebuilt.posterior[pair] == pytest.approx(exact, abs=1e-12)
        assert abs(exact - post) < 1e-6
    _same(rebuilt, full, tolerance=1e-6)


def test_an_annotator_the_accuracies_do_not_name_counts_at_the_prior():
    closure = Closure("xyz")
    votes = [Vote("x", "y", True, "ann"), Vote("x", "y", False, "new")]
    fit = rebuild({"ann": 0.9}, votes, closure)
    assert fit.posterior[("x", "y")] == pytest.approx(0.5)  # 0.9 against the prior 0.9
    assert fit.tied == [("x", "y")] and ("x", "y") in fit.contested
    assert fit.accuracy == {"ann": 0.9}
    assert rebuild({"ann": 0.9}, votes, closure, prior=0.6).tied == []


def test_a_label_held_against_its_answers_is_contested_and_not_given_way():
    """A pair whose label a local repair held for the refit: labelled, its answers the other
    way, so contested (it is no pair that gave way: it carries the label)."""
    closure = Closure("xyz")
    closure.add_label("x", "y", True)
    votes = [Vote("x", "y", False, who) for who in ("a", "b", "c")]
    fit = rebuild({"a": 0.9, "b": 0.9, "c": 0.9}, votes, closure)
    assert fit.labels == {("x", "y"): True} and fit.values == {("x", "y"): True}
    assert fit.gave_way == [] and list(fit.contested) == [("x", "y")]
    assert fit.confidence[("x", "y")] == fit.posterior[("x", "y")] < 0.01  # of the label


def test_a_pair_the_closure_contradicts_gives_way():
    closure = Closure("xyz")
    closure.add_label("x", "y", True)
    closure.add_label("y", "z", True)
    votes = [Vote("x", "y", True, "a"), Vote("y", "z", True, "a"),
             Vote("x", "z", False, "a"), Vote("x", "z", False, "b")]
    fit = rebuild({"a": 0.8, "b": 0.8}, votes, closure)
    assert fit.gave_way == [("x", "z")] and ("x", "z") not in fit.labels
    assert fit.values[("x", "z")] is True and ("x", "z") in fit.contested


def test_no_answers_rebuild_an_empty_fit_and_unknown_concepts_are_refused():
    fit = rebuild({"a": 0.8}, [], Closure("xy"))
    assert fit.labels == {} and fit.posterior == {} and fit.accuracy == {"a": 0.8}
    with pytest.raises(ValueError, match="invalid pair"):
        rebuild({}, [Vote("x", "q", True, "a")], Closure("xy"))


_vote = st.tuples(st.integers(0, 4), st.integers(0, 4), st.booleans(),
                  st.sampled_from(["a", "b", "c", None]), st.booleans(),
                  st.integers(0, 30)).filter(lambda t: t[0] != t[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(_vote, min_size=1, max_size=25))
def test_any_small_team_is_rebuilt_as_its_full_fit(raw):
    answers = [Vote(a, b, positive, who, reviewer=who is None and rare > 27, order=k)
               for k, (a, b, positive, who, _, rare) in enumerate(raw)]
    full = consensus(answers, range(5))
    rebuilt = rebuild(full.accuracy, answers, _closure(full, range(5)))
    near = [p for p, post in full.posterior.items()
            if abs(abs(post - 0.5) - 0.1) < 1e-6]  # a tie's edge: the EM's last step decides
    if not near:
        _same(rebuilt, full)
