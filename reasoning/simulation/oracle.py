"""Who answers the simulation's questions.

The ask loop (:mod:`reasoning.simulation.loop`) asks an :class:`Oracle` for the label of a pool
row; :class:`TruthOracle` answers with the true label. :class:`NoisyAnnotator` is an annotator
who errs: each answer is wrong with probability ``eps``, and a ``direct`` annotator answers the
direct relation (negative for a pair implied only through other concepts) with ``eps`` on top.
:class:`Team` holds several, their noise drawn from one seed so that every policy of a repeat
sees the same draw for the same (pair, annotator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx
import numpy as np

__all__ = ["NOISE_MODELS", "NoisyAnnotator", "Oracle", "Team", "TruthOracle", "direct_truth"]

NOISE_MODELS = ("independent", "direct")
"""How a simulated annotator errs: ``independent`` (each answer wrong with probability ε) or
``direct`` (the direct relation: negative for a pair implied only through other concepts, ε on
top)."""

_NOISE_SALT = 4099
"""Mixed into the noise draws' seed, apart from the seed questions' and the strategies'."""


class Oracle(Protocol):
    """Answers questions about the pool pairs of one run."""

    def answer(self, row: int) -> bool:
        """The label of the pool row ``row``: True when its ``a`` is a prerequisite of ``b``."""
        ...


@dataclass(frozen=True)
class TruthOracle:
    """The true label of every pool row.

    Examples
    --------
    >>> TruthOracle(np.array([True, False])).answer(1)
    False
    """

    truth: np.ndarray

    def answer(self, row: int) -> bool:
        return bool(self.truth[row])


def direct_truth(pairs: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """What an annotator who answers the direct relation says: positive only for the cover
    pairs (the transitive reduction of the positive pool pairs)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    truth = np.asarray(truth, dtype=bool)
    graph = nx.DiGraph()
    graph.add_edges_from(map(tuple, pairs[truth].tolist()))
    reduction = nx.transitive_reduction(graph)
    return np.array([bool(t) and reduction.has_edge(int(a), int(b))
                     for (a, b), t in zip(pairs.tolist(), truth.tolist(), strict=True)],
                    dtype=bool)


@dataclass(frozen=True)
class NoisyAnnotator:
    """One annotator: ``answer(row)`` is ``base[row]`` flipped where ``draws[row] < eps``.

    ``base`` is the truth (``independent``) or :func:`direct_truth` (``direct``); ``draws``
    one uniform number per pool row, so asking the same row twice gives the same answer.

    Examples
    --------
    >>> NoisyAnnotator(np.array([True, True]), np.array([0.01, 0.5]), 0.1).answer(0)
    False
    """

    base: np.ndarray
    draws: np.ndarray
    eps: float

    def answer(self, row: int) -> bool:
        return bool(self.base[row]) ^ bool(self.draws[row] < self.eps)


@dataclass(frozen=True)
class Team:
    """The annotators of one run, each an :class:`Oracle`; ``names[k]`` is annotator ``k``."""

    members: tuple[NoisyAnnotator, ...]
    names: tuple[str, ...]

    @classmethod
    def build(cls, pairs: np.ndarray, truth: np.ndarray, noise: Sequence[float],
              models: Sequence[str], *, seed: int, repeat: int) -> Team:
        """``len(noise)`` annotators (``models`` per annotator, one of :data:`NOISE_MODELS`);
        the draws depend on ``(seed, repeat)`` only, never on the policy."""
        if len(noise) != len(models):
            raise ValueError("one noise level and one noise model per annotator")
        unknown = sorted(set(models) - set(NOISE_MODELS))
        if unknown:
            raise ValueError(f"unknown noise model(s) {', '.join(unknown)}; "
                             f"valid: {', '.join(NOISE_MODELS)}")
        truth = np.asarray(truth, dtype=bool)
        direct = direct_truth(pairs, truth) if "direct" in models else truth
        rng = np.random.default_rng(np.random.SeedSequence([seed, repeat, _NOISE_SALT]))
        draws = rng.random((len(noise), len(truth)))
        members = tuple(NoisyAnnotator(direct if m == "direct" else truth, draws[k], float(e))
                        for k, (e, m) in enumerate(zip(noise, models, strict=True)))
        return cls(members, tuple(f"annotator-{k + 1}" for k in range(len(members))))

    def __len__(self) -> int:
        return len(self.members)

    def answer(self, row: int, member: int) -> bool:
        """The answer of annotator ``member`` on pool row ``row``."""
        return self.members[member].answer(row)
