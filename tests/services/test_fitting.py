"""What the worker runs reads the model families: a key's name, its place of training, its
inputs, fit and outputs all come from its family, for strategies and prediction alike."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from app.schemas import PredictionModelName
from app.services.fitting import PREDICTION_MODELS, ModelKey, fit_outputs
from app.settings import Settings
from reasoning.generate import random_order
from reasoning.strategies import FAMILIES

KEYS = ([ModelKey("strategy", f.name, True) for f in FAMILIES if f.needs_model]
        + [ModelKey("prediction", f.name, True) for f in PREDICTION_MODELS])


def test_the_prediction_models_are_those_a_project_may_choose() -> None:
    names = tuple(f.name for f in PREDICTION_MODELS)
    assert names == typing.get_args(PredictionModelName)
    assert Settings().default_prediction_model in names


def test_keys_say_the_names_in_answers_and_where_they_train() -> None:
    named = {(key.purpose, key.kind): (key.name, key.trains_here) for key in KEYS}
    assert named == {
        ("strategy", "lc"): ("logistic_regression", True),
        ("strategy", "qbc"): ("decision_tree_committee", True),
        ("strategy", "forest"): ("extra_trees", False),
        ("prediction", "random_forest"): ("random_forest", False),
        ("prediction", "logistic_regression"): ("logistic_regression", False),
    }
    assert sorted(KEYS, key=lambda k: k.rank)[:2] == KEYS[:2]  # fast ones first
    with pytest.raises(KeyError):
        _ = ModelKey("prediction", "lc", True).family  # a strategy family predicts nothing


@pytest.mark.parametrize("key", KEYS, ids=[f"{k.purpose}-{k.kind}" for k in KEYS])
def test_every_key_fits_and_gives_outputs_on_the_pool(key: ModelKey) -> None:
    order = random_order(10, 40, positive_share=0.4, random_state=1)
    truth = order.labels.astype(np.int64)
    X = np.column_stack([truth + np.random.default_rng(1).normal(0, 0.5, len(truth)),
                         np.zeros(len(truth))])
    values = truth.astype(np.int8)
    mask = np.arange(len(truth)) % 3 != 0
    concepts = order.pool if key.family.reads_pool else None
    outputs = fit_outputs(key, X, concepts, values, mask)
    assert outputs is not None and len(outputs) == len(truth)
    assert (outputs.votes is not None) == (key.kind == "qbc")
    one_class = fit_outputs(key, X, concepts, np.ones_like(values), mask)
    assert one_class is None
