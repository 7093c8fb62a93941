"""The models behind the query strategies: a probabilistic classifier and a committee.

The LC strategies need a probability of *positive* for every pool pair; the paper uses logistic
regression on standardized features (:func:`make_probabilistic`). The QBC strategies need the
votes of a committee; the paper uses query-by-bagging with three decision trees
(:class:`Committee`, a thin estimator over :class:`sklearn.ensemble.BaggingClassifier`).

Both are ordinary scikit-learn estimators, so a user can pass another one: any classifier with
``predict_proba`` for the LC family, any base classifier for the committee.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import BaggingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

__all__ = [
    "COMMITTEE_SIZE",
    "FOREST_TREES",
    "Committee",
    "committee_votes",
    "make_probabilistic",
    "positive_proba",
]

COMMITTEE_SIZE = 3
"""Members of the QBC committee, as in the paper."""

FOREST_TREES = 200
"""Trees of the paper's random forest: the simulation's evaluation model and the service's
default prediction model."""


def make_probabilistic(random_state: int | None = None) -> Pipeline:
    """The LC model of the paper: logistic regression on standardized features.

    Examples
    --------
    >>> model = make_probabilistic().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
    >>> bool(positive_proba(model, [[3.0]])[0] > 0.5)
    True
    """
    return make_pipeline(StandardScaler(),
                         LogisticRegression(max_iter=1000, random_state=random_state))


class Committee(ClassifierMixin, BaseEstimator):
    """Query-by-bagging: ``n_members`` copies of ``estimator`` fitted on bootstrap bags.

    Parameters
    ----------
    estimator : classifier, optional
        The base classifier cloned for every member (default: a decision tree).
    n_members : int, default 3
        The committee size.
    random_state : int, optional
        Seeds the bags and the members.

    Attributes
    ----------
    bagging_ : BaggingClassifier
        The fitted members live in ``bagging_.estimators_``.
    classes_ : ndarray
        The class labels seen in ``fit``.

    Examples
    --------
    >>> X = [[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]]
    >>> committee = Committee(random_state=0).fit(X, [0, 0, 0, 1, 1, 1])
    >>> committee.votes([[0.0], [5.0]]).shape
    (3, 2)
    """

    def __init__(self, estimator=None, n_members: int = COMMITTEE_SIZE,
                 random_state: int | None = None) -> None:
        self.estimator = estimator
        self.n_members = n_members
        self.random_state = random_state

    def fit(self, X, y) -> Committee:
        base = DecisionTreeClassifier() if self.estimator is None else clone(self.estimator)
        self.bagging_ = BaggingClassifier(estimator=base, n_estimators=self.n_members,
                                          bootstrap=True, random_state=self.random_state)
        self.bagging_.fit(np.asarray(X, dtype=np.float64), np.asarray(y))
        self.classes_ = self.bagging_.classes_
        return self

    def votes(self, X) -> np.ndarray:
        """Each member's vote for *positive*: an int array of shape ``(n_members, m)``.

        A member trained on a bag that held one class only always votes for that class.
        """
        X = np.asarray(X, dtype=np.float64)
        positive = _positive_class(self.classes_)
        bag = self.bagging_
        rows = []
        for member, features in zip(bag.estimators_, bag.estimators_features_, strict=True):
            # members are trained on class indices into classes_, not on the labels themselves
            predicted = self.classes_[np.asarray(member.predict(X[:, features]), dtype=np.int64)]
            rows.append(predicted == positive)
        return np.array(rows, dtype=np.int64).reshape(len(rows), len(X))

    def predict_proba(self, X) -> np.ndarray:
        """The fraction of members voting for each class, in the order of ``classes_``."""
        share = self.votes(X).mean(axis=0)
        if len(self.classes_) == 1:
            return np.ones((len(share), 1))
        positive = np.flatnonzero(self.classes_ == _positive_class(self.classes_))[0]
        proba = np.empty((len(share), 2))
        proba[:, positive] = share
        proba[:, 1 - positive] = 1.0 - share
        return proba

    def predict(self, X) -> np.ndarray:
        """The majority vote."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def _positive_class(classes: np.ndarray):
    """The label standing for *positive*: 1 (or True) when present, else the largest class."""
    return 1 if np.any(classes == 1) else classes[-1]


def positive_proba(model, X) -> np.ndarray:
    """``p(positive)`` per row for any fitted classifier with ``predict_proba`` and ``classes_``.

    A model that never saw the positive class gives 0.
    """
    X = np.asarray(X, dtype=np.float64)
    proba = np.asarray(model.predict_proba(X), dtype=np.float64)
    classes = np.asarray(model.classes_)
    hit = np.flatnonzero(classes == 1)
    if len(hit) == 0:
        return np.zeros(len(X))
    return proba[:, hit[0]]


def committee_votes(model, X) -> np.ndarray:
    """Votes for *positive* of each member, shape ``(n_members, m)``.

    ``model`` has a ``votes`` method (:class:`Committee`) or is a fitted
    :class:`~sklearn.ensemble.BaggingClassifier`-like ensemble with ``estimators_``.
    """
    if hasattr(model, "votes"):
        return np.asarray(model.votes(X), dtype=np.int64)
    X = np.asarray(X, dtype=np.float64)
    classes = np.asarray(model.classes_)
    features = getattr(model, "estimators_features_", [slice(None)] * len(model.estimators_))
    return np.array([classes[np.asarray(m.predict(X[:, f]), dtype=np.int64)] == 1
                     for m, f in zip(model.estimators_, features, strict=True)], dtype=np.int64)
