"""Who answers the simulation's questions.

The ask loop (:mod:`reasoning.simulation.loop`) asks an :class:`Oracle` for the label of a pool
row; :class:`TruthOracle` answers with the true label. An annotator that errs, or a panel of
them, plugs in as another oracle (the closure then meets contradictions the truth never
causes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["Oracle", "TruthOracle"]


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
