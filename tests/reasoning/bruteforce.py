"""A brute-force oracle: the fixpoint of the four completeness rules of Definition 2.

Deliberately naive (loops over pairs of decided pairs until nothing changes), so that it shares
no idea with the closed form of ``docs/design/closure.md`` that the core and the baselines use.
Meant for orders of a handful of concepts only.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

__all__ = ["fixpoint"]

Pair = tuple[Hashable, Hashable]


def _concepts(n_or_concepts: int | Iterable[Hashable]) -> set[Hashable]:
    if isinstance(n_or_concepts, int):
        return set(range(n_or_concepts))
    return set(n_or_concepts)


def _one_pass(positive: set[Pair], negative: set[Pair]) -> tuple[set[Pair], set[Pair]]:
    """The pairs that one application of rules (i)-(iv) adds to ``positive`` and ``negative``."""
    new_positive: set[Pair] = set()
    new_negative: set[Pair] = set()
    for a, b in positive:
        # (i) a ≺ b and b ≺ c  ⇒  a ≺ c
        new_positive.update((a, c) for b2, c in positive if b2 == b)
        # (ii) a ≺ b and (a, c) negative  ⇒  (b, c) negative
        new_negative.update((b, c) for a2, c in negative if a2 == a)
        # (iii) a ≺ b (read as b ≺ c of the rule) and (x, b) negative  ⇒  (x, a) negative
        new_negative.update((x, a) for x, b2 in negative if b2 == b)
        # (iv) a ≺ b  ⇒  (b, a) negative
        new_negative.add((b, a))
    return new_positive - positive, new_negative - negative


def fixpoint(
    n_or_concepts: int | Iterable[Hashable],
    labels: Iterable[tuple[Hashable, Hashable, bool]],
) -> tuple[set[Pair], set[Pair], bool]:
    """Close ``labels`` under rules (i)-(iv) by repeating them until nothing changes.

    Parameters
    ----------
    n_or_concepts : int or iterable of hashable
        The concepts: ``range(n)`` when an int is given.
    labels : iterable of (a, b, positive)
        The asserted labels. A negative self pair ``(a, a)`` is true in every strict order and
        is ignored; a positive self pair is a contradiction.

    Returns
    -------
    positive, negative : set of (a, b)
        The decided pairs. When the labels are contradictory, these are whatever the rules
        reached (possibly with self pairs and pairs in both sets).
    contradictory : bool
        True when some pair is both positive and negative, or a positive self pair (a cycle of
        positives) appears.

    Examples
    --------
    >>> pos, neg, bad = fixpoint(3, [(0, 1, True), (1, 2, True)])
    >>> sorted(pos), bad
    ([(0, 1), (0, 2), (1, 2)], False)
    >>> sorted(neg)
    [(1, 0), (2, 0), (2, 1)]
    """
    concepts = _concepts(n_or_concepts)
    positive: set[Pair] = set()
    negative: set[Pair] = set()
    for a, b, value in labels:
        if a not in concepts or b not in concepts:
            raise ValueError(f"label ({a!r}, {b!r}) names an unknown concept")
        if value:
            positive.add((a, b))
        elif a != b:
            negative.add((a, b))
    while True:
        new_positive, new_negative = _one_pass(positive, negative)
        if not new_positive and not new_negative:
            break
        positive |= new_positive
        negative |= new_negative
    contradictory = bool(positive & negative) or any(a == b for a, b in positive)
    return positive, negative, contradictory
