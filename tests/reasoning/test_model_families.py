"""The model families are a registry: every strategy's family is in it, each fits, sees and
says what it declares, and an unknown name is an error."""

from __future__ import annotations

import numpy as np
import pytest

from reasoning.generate import random_order
from reasoning.strategies import (
    FAMILIES,
    MIN_TRAIN_ROWS,
    STRATEGIES,
    ModelFamily,
    fit_model,
    get_family,
    model_inputs,
    model_outputs,
)

NAMES = [family.name for family in FAMILIES]


def _case() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A generated order's pool, noisy features of its truth, its labels, and the values with
    half the pool decided."""
    order = random_order(10, 40, positive_share=0.4, random_state=0)
    rng = np.random.default_rng(0)
    truth = order.labels.astype(np.int64)
    X = np.column_stack([truth + rng.normal(0, 0.5, len(truth)), rng.normal(0, 1, len(truth))])
    values = np.where(np.arange(len(truth)) % 2 == 0, truth, -1).astype(np.int8)
    return order.pool, X, truth, values


def test_every_strategy_names_a_registered_family_and_names_are_unique() -> None:
    assert len(set(NAMES)) == len(FAMILIES)
    assert {s.family for s in STRATEGIES} <= set(NAMES)
    for strategy in STRATEGIES:
        assert strategy.needs_model == get_family(strategy.family).needs_model


def test_an_unknown_family_is_an_error() -> None:
    for name in ("LC", "extra_trees", "", None):
        with pytest.raises(ValueError, match="unknown model family"):
            get_family(name)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fit_model("nope", np.zeros((4, 1)), [0, 1, 0, 1])
    family = get_family("lc")
    assert get_family(family) is family


@pytest.mark.parametrize("family", FAMILIES, ids=NAMES)
def test_each_family_fits_sees_and_says_what_it_declares(family: ModelFamily) -> None:
    pool, X, truth, values = _case()
    inputs = model_inputs(family.name, pool, X, values)
    assert len(inputs) == len(pool)
    if not family.reads_pool:
        np.testing.assert_array_equal(inputs, X)
    else:
        assert inputs.shape[1] > X.shape[1]  # more than the pair's own features
    labeled = values >= 0
    model = fit_model(family, inputs[labeled], truth[labeled], random_state=0)
    assert (model is not None) == family.needs_model == (family.model is not None)
    outputs = model_outputs(family, model, inputs)
    if model is None:
        assert outputs is None
        return
    assert outputs is not None and len(outputs) == len(pool)
    empty = model_outputs(family, model, inputs[:0])
    assert empty is not None and len(empty) == 0
    again = model_outputs(family, fit_model(family, inputs[labeled], truth[labeled],
                                            random_state=0), inputs)
    assert again is not None
    for mine, theirs in ((outputs.proba, again.proba), (outputs.votes, again.votes)):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            np.testing.assert_array_equal(mine, theirs)  # seeded: the same model


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.needs_model],
                         ids=[f.name for f in FAMILIES if f.needs_model])
def test_too_few_rows_or_one_class_fit_no_model(family: ModelFamily) -> None:
    X = np.arange(8, dtype=float).reshape(-1, 1)
    assert fit_model(family, X[:MIN_TRAIN_ROWS - 1], [1]) is None
    assert fit_model(family, X[:4], [1, 1, 1, 1]) is None
    assert fit_model(family, X[:4], [0, 1, 0, 1], random_state=0) is not None


def test_only_the_forest_trains_in_the_worker() -> None:
    assert [f.name for f in FAMILIES if f.trains_in_worker] == ["forest"]
