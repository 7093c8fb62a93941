"""The literal baseline: Theorem 1 of Liang et al. (2018) as the paper states it.

The complete set ``H`` of decided pairs is two Python sets of pairs, and a new label on an
undecided pair ``(a, b)`` adds the paper's sets, each built pair by pair from ``H``:

* negative label: ``N' = {(c, d) : c = a or (a, c) ∈ H⁺,  d = b or (d, b) ∈ H⁺}``;
* positive label: the new positives ``N = {(c, d) : c = a or (c, a) ∈ H⁺,  d = b or (b, d) ∈ H⁺}``
  and the new negatives

  - ``R = {(d, c) : (c, d) ∈ N}``                                   (rule iv),
  - ``S = {(d, e) : (c, d) ∈ N, (c, e) ∈ H⁻}``                      (rule ii),
  - ``T = {(e, c) : (c, d) ∈ N, (e, d) ∈ H⁻}``                      (rule iii),
  - ``O = {(d, c') : (c, d) ∈ N, (c', d') ∈ N, (c, d') ∈ H⁻}``      (rule ii then iii).

Proposition 2 of the paper shows that ``O`` adds nothing when ``H`` is complete; the pruned
variant (the default) skips it, the unpruned one computes it in full. No bitsets, no matrices, no
index by concept: this is the baseline that :mod:`benchmarks.closure` measures the core against,
and a second oracle in the tests. It is not used by the service.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from reasoning.closure import ReasoningError

__all__ = ["LiteralClosure", "LiteralContradiction"]

Pair = tuple[Hashable, Hashable]


class LiteralContradiction(ReasoningError):
    """A label whose pair the baseline has already decided the other way."""


class LiteralClosure:
    """The complete set of decided pairs, grown one label at a time by Theorem 1.

    Parameters
    ----------
    prune : bool, default True
        Apply Proposition 2 (skip the set ``O``). ``False`` computes ``O`` in full.

    Attributes
    ----------
    positive, negative : set of (a, b)
        The decided pairs ``H⁺`` and ``H⁻``.

    Examples
    --------
    >>> h = LiteralClosure()
    >>> h.add_label(0, 1, True)
    (set(), {(1, 0)})
    >>> sorted(h.add_label(1, 2, True)[0])
    [(0, 2)]
    """

    def __init__(self, prune: bool = True) -> None:
        self.prune = prune
        self.positive: set[Pair] = set()
        self.negative: set[Pair] = set()

    def __len__(self) -> int:
        """``|H|``, the number of decided pairs."""
        return len(self.positive) + len(self.negative)

    def value(self, a: Hashable, b: Hashable) -> bool | None:
        """True, False, or None when ``(a, b)`` is undecided."""
        if (a, b) in self.positive:
            return True
        if (a, b) in self.negative:
            return False
        return None

    # The paper's sets, each a generator over pairs of H (duplicates are harmless: callers
    # collect them into sets or skip the ones already seen).

    def _negative_sets(self, a: Hashable, b: Hashable) -> Iterator[set[Pair]]:
        """``N'`` of a negative label on ``(a, b)``."""
        after_a = {a} | {c for (x, c) in self.positive if x == a}
        before_b = {b} | {d for (d, y) in self.positive if y == b}
        yield {(c, d) for c in after_a for d in before_b}

    def _positive_sets(self, a: Hashable, b: Hashable) -> Iterator[set[Pair]]:
        """``N`` (positives), then ``R``, ``S``, ``T`` and, unpruned, ``O`` (negatives)."""
        before_a = {a} | {c for (c, x) in self.positive if x == a}
        after_b = {b} | {d for (y, d) in self.positive if y == b}
        new = {(c, d) for c in before_a for d in after_b}
        yield new
        yield {(d, c) for (c, d) in new}
        yield {(d, e) for (c, d) in new for (c2, e) in self.negative if c2 == c}
        yield {(e, c) for (c, d) in new for (e, d2) in self.negative if d2 == d}
        if not self.prune:
            yield {(d, c2) for (c, d) in new for (c2, d2) in new if (c, d2) in self.negative}

    def _check(self, a: Hashable, b: Hashable, positive: bool) -> bool:
        """True when the label is new; raise when it contradicts ``H``."""
        if a == b:
            raise ValueError(f"({a!r}, {b!r}) is a self pair")
        known = self.value(a, b)
        if known is None:
            return True
        if known != positive:
            raise LiteralContradiction(f"({a!r}, {b!r}) is already decided {known}")
        return False

    def add_label(self, a: Hashable, b: Hashable, positive: bool) -> tuple[set[Pair], set[Pair]]:
        """Add a label and return the pairs it newly decides, positive and negative.

        The label's own pair is not in the result (it is decided by being asserted), as in the
        core's :class:`~reasoning.closure.Update`.

        Raises
        ------
        ValueError
            For a self pair.
        LiteralContradiction
            When ``(a, b)`` is already decided the other way.
        """
        if not self._check(a, b, positive):
            return set(), set()
        if positive:
            sets = self._positive_sets(a, b)
            new_positive = next(sets) - self.positive
            new_negative = set().union(*sets) - self.negative
        else:
            new_positive = set()
            new_negative = set().union(*self._negative_sets(a, b)) - self.negative
        self.positive |= new_positive
        self.negative |= new_negative
        new_positive.discard((a, b))
        new_negative.discard((a, b))
        return new_positive, new_negative

    def gain(self, a: Hashable, b: Hashable, positive: bool, pool: set[Pair]) -> int:
        """How many pairs of ``pool`` the label would newly decide, without changing ``H``.

        Walks the sets one by one, as the paper scores a candidate, counting each undecided
        pool pair once (the candidate's own pair included when it is in the pool).
        """
        sets = self._positive_sets(a, b) if positive else self._negative_sets(a, b)
        counted: set[Pair] = set()
        for added in sets:
            for pair in added:
                if pair in pool and pair not in counted and self.value(*pair) is None:
                    counted.add(pair)
        return len(counted)
