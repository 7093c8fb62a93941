"""The trainer through its public interface: it owns the models of each project.

A project's state is filled by hand from a small generated order (no database, no HTTP): the
trainer only reads the state, and hears from the registry when a state leaves it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest

from app.services.state import LiveLabel, ProjectState, StateRegistry
from app.services.training import ModelKey, TrainedModel, Trainer
from reasoning.generate import random_order

LC = ModelKey("strategy", "lc", closure_labels=False)  # trains in the trainer thread
WAIT = 30.0  # seconds a test waits at most for a model that should come


@pytest.fixture
def registry() -> StateRegistry:
    return StateRegistry(capacity=2)


@pytest.fixture
def trainer(registry: StateRegistry) -> Iterator[Trainer]:
    trainer = Trainer(registry, nice=0)
    yield trainer
    trainer.close()


class _Project:
    """A generated order on 12 concepts and 40 pool pairs, labeled pair by pair."""

    def __init__(self, registry: StateRegistry, project_id: int, seed: int = 0) -> None:
        self.order = random_order(12, 40, positive_share=0.4, random_state=seed)
        self.state = registry.get(project_id)
        self.labeled = 0
        rng = np.random.default_rng(seed)
        truth = self.order.labels.astype(float)
        features = np.column_stack([truth + rng.normal(0, 0.3, len(truth)),
                                    rng.normal(0, 1, len(truth))])
        with self.state.lock:
            for concept in self.order.concepts:
                self.state.add_concept(concept, f"c{concept}")
            self.state.add_pairs([(row + 1, int(a), int(b), features[row])
                                  for row, (a, b) in enumerate(self.order.pool.tolist())])
            self.state.version = 0
        self.label(4)

    def label(self, count: int) -> None:
        """Assert the truth of the next ``count`` pool pairs, as a request would."""
        state = self.state
        with state.lock:
            for _ in range(count):
                row = self.labeled
                a, b = (int(x) for x in self.order.pool[row])
                positive = bool(self.order.labels[row])
                state.add_label(a, b, positive)
                state.remember((a, b), LiveLabel(row + 1, positive, None,
                                                 datetime.now(UTC)))
                self.labeled += 1
            state.version += 1


def _trained(trainer: Trainer, state: ProjectState, key: ModelKey = LC) -> TrainedModel:
    """Ask for ``key``, wait until it is trained on the state as it is, and answer it."""
    with state.lock:
        trainer.want(state, key)
        target = state.training_key()
    assert trainer.wait_fresh(state, key, target, WAIT)
    with state.lock:
        model = trainer.want(state, key)
    assert model is not None
    return model


def test_it_trains_the_model_a_state_wants_and_answers_it(
        registry: StateRegistry, trainer: Trainer) -> None:
    state = _Project(registry, 1).state
    with state.lock:
        assert trainer.want(state, LC) is None  # nothing trained yet: the request goes on
    model = _trained(trainer, state)
    assert model.key == LC and model.fitted and model.is_fresh(state)
    positive = int(sum(label.positive for label in state.labels.values()))
    assert 0 < positive < 4  # both classes among the asserted pairs
    assert model.info(state) == {
        "name": "logistic_regression", "trained_on": 4, "positive": positive,
        "negative": 4 - positive, "version": state.version, "labels_behind": 0}
    assert trainer.models(1) == {LC: model}
    with state.lock:
        outputs = trainer.pool_outputs(state, model)
    assert outputs is not None and outputs.proba is not None
    assert outputs.proba.shape == (len(state.pool),)


def test_a_model_trained_on_older_labels_says_how_far_behind_it_is(
        registry: StateRegistry, trainer: Trainer) -> None:
    project = _Project(registry, 1)
    state = project.state
    old = _trained(trainer, state)
    project.label(2)
    with state.lock:
        state.forget_label(1)  # a retraction counts too
        assert trainer.want(state, LC) is old  # the newest that exists, until a newer one
        assert not old.is_fresh(state)
        info = old.info(state)
    assert info is not None and info["labels_behind"] == 3
    new = _trained(trainer, state)
    assert new is not old
    info = new.info(state)
    assert info is not None and info["labels_behind"] == 0
    assert new.version > old.version


def test_wait_fresh_returns_once_a_fresh_model_exists_and_times_out_otherwise(
        registry: StateRegistry, trainer: Trainer) -> None:
    project = _Project(registry, 1)
    state = project.state
    _trained(trainer, state)
    project.label(1)  # the trainer is not told: nothing is scheduled
    target = state.training_key()
    started = time.monotonic()
    assert not trainer.wait_fresh(state, LC, target, 0.3)
    assert time.monotonic() - started >= 0.3
    trainer.changed(state)  # as a request that changed the labels does: the model is wanted
    assert trainer.wait_fresh(state, LC, target, WAIT)
    assert trainer.models(1)[LC].is_fresh(state)


def test_dropping_a_project_drops_its_models(registry: StateRegistry, trainer: Trainer) -> None:
    first, second = _Project(registry, 1).state, _Project(registry, 2, seed=1).state
    _trained(trainer, first)
    kept = _trained(trainer, second)
    registry.drop(1)  # the project was deleted
    assert trainer.models(1) == {}
    assert trainer.models(2) == {LC: kept}


def test_an_evicted_state_takes_its_models_with_it(
        registry: StateRegistry, trainer: Trainer) -> None:
    first, second = _Project(registry, 1).state, _Project(registry, 2, seed=1).state
    _trained(trainer, first)
    kept = _trained(trainer, second)
    registry.get(3)  # capacity 2: the least recently used state (project 1) goes
    assert registry.cached(1) is None
    assert trainer.models(1) == {}
    assert trainer.models(2) == {LC: kept}


def test_what_is_derived_from_a_model_is_made_once_per_model_and_decided_set(
        registry: StateRegistry, trainer: Trainer) -> None:
    project = _Project(registry, 1)
    state = project.state
    made: list[int] = []

    def derived() -> list[int]:
        made.append(1)
        return [len(made)]

    def ask() -> list[int]:
        with state.lock:
            model = trainer.want(state, LC)
            assert model is not None
            outputs = trainer.pool_outputs(state, model)
            assert outputs is not None and outputs.proba is not None
            return trainer.completed_map(state, LC, outputs.proba, derived)

    _trained(trainer, state)
    assert ask() == ask() == [1]
    project.label(1)  # another decided set (the model as it was)
    assert ask() == [2]
    _trained(trainer, state)  # another model
    assert ask() == [3]
