"""The nine query strategies of Liang et al. (2018), Table 3, those beyond it, and batches.

A strategy is a frozen :class:`Strategy` object in the registry :data:`STRATEGIES`
(:mod:`~reasoning.strategies.catalogue`): its name, the family of its model, whether the
closure's labels join its labeled set, and a small *score* function over the candidate pool
pairs. A separate *selection* step keeps the best ``k`` with a seeded random tie-break
(:mod:`~reasoning.strategies.selection`), in the manner of modAL:

======== ============ ====================== ========================================
family   no reasoning ``-R``: closure labels ``-R+``: closure also scores the question
======== ============ ====================== ========================================
random   ``Random``   ``Random-R``           ``CNT``
LC       ``LC``       ``LC-R``               ``LC-R+``
QBC      ``QBC``      ``QBC-R``              ``QBC-R+``
======== ============ ====================== ========================================

* ``Random``: every candidate scores the same; the tie-break picks uniformly.
* ``LC`` (least confident): ``1 - max(p, 1 - p)`` with ``p`` the probability of *positive*.
* ``QBC`` (query by committee): the number of members that disagree with the majority.
* ``-R+`` (Eq. 4–6): ``min(F(a, b, +), F(a, b, −))``, the weight that either answer is sure to
  decide among the undecided pool pairs (:func:`reasoning.gains.candidate_gains`), with the
  weights of ``docs/design/closure.md``: CNT 1/1, LC-R+ ``1 - p``/``p``, QBC-R+ the number of
  members voting negative/positive.

Beyond the paper (:data:`NEW_STRATEGIES`):

* ``EDP`` (expected decided pairs): ``p·F(+) + (1 − p)·F(−)`` with ``F`` the *count* of the
  undecided pool pairs each answer would newly decide and ``p`` the LC model's probability of
  positive for the candidate. The paper's ``-R+`` scores what is decided whichever the
  answer (the minimum); EDP scores what is decided on average, the greedy step towards a
  complete map for the fewest questions (``sporal simulate --mode coverage``).
* ``EDP-Q``: the same expectation with ``p`` the share of the QBC committee voting positive.
* ``EDP-C``: the same expectation with the LC model's ``p`` made order-respecting first
  (:func:`reasoning.consistent.soft_probabilities`: the max-min transitive closure with the
  decided pairs, asymmetry, blended 50/50 with the raw ``p``).
* ``EDP-F``: ``p·(γ + (1 − γ)·free)·F(+) + (1 − p)·F(−)`` with ``p`` from extra trees
  (:data:`FOREST_STRATEGY_TREES`) trained on the pair's features, its reverse pair's and its
  concepts' decided shares (:func:`reasoning.model_features.forest_features`), and ``free``
  the chance that no two-step path implies the pair (:func:`path_free`): a positive pair that
  a path implies is decided for free once the path is known, so asking it first wastes the
  question. ``γ`` is :data:`PATH_FLOOR`.

:data:`DEFAULT_STRATEGY` (``default`` in :func:`parse_strategy`) is the best of them in the
coverage measure.

With ``k > 1`` the batch holds no pair that either answer to another pair of the batch would
decide (:func:`entangled`): such a question would be wasted once the other is answered.

Names are read once, where they come in (the ``next`` route, the ``simulate`` command, the
simulation's runners): :func:`get_strategy` gives the object, which is passed on from there.
The models go by their family alone (a :class:`ModelFamily` of the registry :data:`FAMILIES`,
read by :func:`get_family`; :func:`fit_model`, :func:`model_inputs`, :func:`model_outputs`), so
whoever trains them (the service's trainer, the simulation) needs no strategy to do so.

Adding a strategy
-----------------
1. Write its score function in :mod:`~reasoning.strategies.catalogue`: it takes a
   :class:`ScoringContext` (the closure, the pool, the candidate rows, the decided values of
   the pool and the model's outputs) and returns :class:`Scores` for ``context.rows``. Build
   it from the blocks of :mod:`~reasoning.strategies.scores` and keep it at module level.
2. Register one :class:`Strategy` at the *end* of :data:`STRATEGIES` (a strategy's position
   seeds its randomness in the simulation): name, model family, whether it learns from the
   closure, the score function and any aliases.
3. What a strategy needs beyond the closure, the pool and its model (say, the answers of
   several annotators to a pair) becomes a field of :class:`ScoringContext`, filled by
   :func:`score_candidates` from an argument its callers pass; the strategies that do not
   read it are unchanged.

The ``next`` route's documentation of ``strategy`` (``app/routes/queries.py``), the simulation
and the report pick the new strategy up from the registry.
"""

from reasoning.strategies.catalogue import (
    ALL_STRATEGIES,
    DEFAULT_STRATEGY,
    NEW_STRATEGIES,
    STRATEGIES,
    STRATEGY_NAMES,
    ScoreFunction,
    ScoringContext,
    Strategy,
    family,
    get_strategy,
    needs_model,
    parse_strategy,
    uses_closure,
)
from reasoning.strategies.models import (
    FAMILIES,
    FOREST_STRATEGY_TREES,
    MIN_TRAIN_ROWS,
    Family,
    ModelFamily,
    ModelOutputs,
    fit_model,
    get_family,
    model_inputs,
    model_outputs,
    proba_outputs,
)
from reasoning.strategies.scores import (
    PATH_EXACT,
    PATH_FLOOR,
    PATH_MOST,
    PATH_WORK,
    Scores,
    disagreement,
    expected_decided,
    least_confidence,
    path_free,
    scores_by_gain,
)
from reasoning.strategies.selection import (
    entangled,
    rank,
    score_candidates,
    select,
    select_batch,
)

__all__ = [
    "ALL_STRATEGIES",
    "DEFAULT_STRATEGY",
    "FAMILIES",
    "FOREST_STRATEGY_TREES",
    "MIN_TRAIN_ROWS",
    "NEW_STRATEGIES",
    "PATH_EXACT",
    "PATH_FLOOR",
    "PATH_MOST",
    "PATH_WORK",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "Family",
    "ModelFamily",
    "ModelOutputs",
    "ScoreFunction",
    "Scores",
    "ScoringContext",
    "Strategy",
    "disagreement",
    "entangled",
    "expected_decided",
    "family",
    "fit_model",
    "get_family",
    "get_strategy",
    "least_confidence",
    "model_inputs",
    "model_outputs",
    "needs_model",
    "parse_strategy",
    "path_free",
    "proba_outputs",
    "rank",
    "score_candidates",
    "scores_by_gain",
    "select",
    "select_batch",
    "uses_closure",
]
