"""Random strict orders with a pool of candidate pairs, for tests and scale benchmarks.

An order is drawn as a layered DAG: every concept gets a level (a random permutation decides who
sits where, so concept indices are *not* a topological order), and each concept above level 0
draws a Poisson number of parents from lower levels, mostly the level just below. The depth
bounds how long the chains are and the degree how wide the ancestor sets grow, which keeps the
positive closure near ``n · degree^depth`` at worst, and much lower in practice, as in real
prerequisite maps (wide, shallow). The truth of any pair comes from a packed reachability bitset
(``n²/8`` bytes: 3 MB at ``n = 5,000``); no graph of the closure is ever built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GeneratedOrder", "random_order"]


@dataclass(frozen=True, eq=False)
class GeneratedOrder:
    """A random strict order on ``range(n)`` and a pool of labeled pairs.

    Attributes
    ----------
    concepts : tuple of int
        The concepts ``0 .. n-1`` (each concept is its own index).
    covers : array of shape (k, 2)
        The cover edges ``(a, b)`` (``a ≺ b`` with nothing in between): the transitive reduction.
    reach : array of shape (n, ceil(n / 8)), uint8
        Packed reachability: bit ``b`` of row ``a`` (``np.packbits`` order) is set iff ``a ≺ b``.
    pool : array of shape (m, 2)
        Distinct candidate pairs, never a self pair.
    labels : bool array of shape (m,)
        The truth of each pool pair.
    """

    concepts: tuple[int, ...]
    covers: np.ndarray
    reach: np.ndarray
    pool: np.ndarray
    labels: np.ndarray

    @property
    def n(self) -> int:
        """The number of concepts."""
        return len(self.concepts)

    @property
    def n_positive(self) -> int:
        """The size of the positive relation (the closure of the covers)."""
        return int(np.unpackbits(self.reach, axis=1, count=self.n).sum())

    def is_positive(self, a, b) -> np.ndarray | bool:
        """The truth of ``a ≺ b``, for scalars or index arrays of the same shape."""
        a, b = np.asarray(a), np.asarray(b)
        bits = (self.reach[a, b >> 3] >> (7 - (b & 7))) & 1
        return bool(bits) if bits.ndim == 0 else bits.astype(bool)

    def positive_pairs(self) -> np.ndarray:
        """Every positive pair, as a ``(p, 2)`` index array (row-major order)."""
        rows, cols = np.nonzero(np.unpackbits(self.reach, axis=1, count=self.n))
        return np.column_stack([rows, cols]).astype(np.int64)

    def sample_labels(
        self, size: int | None = None, random_state=None
    ) -> list[tuple[int, int, bool]]:
        """Pool labels ``(a, b, positive)`` in a random order.

        Parameters
        ----------
        size : int, optional
            How many distinct pool pairs to draw (default: all of them).
        random_state : int or numpy.random.Generator, optional
            Seed of the draw.
        """
        rng = np.random.default_rng(random_state)
        m = len(self.pool)
        order = rng.permutation(m)[: m if size is None else min(size, m)]
        return [(int(self.pool[i, 0]), int(self.pool[i, 1]), bool(self.labels[i])) for i in order]


def _levels(n: int, depth: int, rng: np.random.Generator) -> np.ndarray:
    """A level in ``0 .. depth-1`` for every concept, each level holding about ``n / depth``."""
    levels = np.arange(n) * depth // max(n, 1)
    return levels[rng.permutation(n)]


def _parents(level, by_level, degree, skip, rng) -> np.ndarray:
    """Distinct parents of a concept at ``level``: Poisson(degree) draws from the levels below."""
    if level == 0:
        return np.empty(0, dtype=np.int64)
    k = rng.poisson(degree)
    chosen = set()
    for _ in range(k):
        source = rng.integers(0, level) if rng.random() < skip else level - 1
        members = by_level[source]
        chosen.add(int(members[rng.integers(len(members))]))
    return np.fromiter(sorted(chosen), dtype=np.int64)


def _reachability(n, levels, parents) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Packed ancestor rows, then reach (descendant rows) and the cover edges."""
    words = (n + 7) // 8
    ancestors = np.zeros((n, words), dtype=np.uint8)
    covers: list[tuple[int, int]] = []
    for j in np.argsort(levels, kind="stable"):  # lower levels first: a topological order
        ps = parents[j]
        for p in ps:
            ancestors[j] |= ancestors[p]
            ancestors[j, p >> 3] |= np.uint8(0x80 >> (p & 7))  # np.packbits bit order
        for p in ps:
            # (p, j) is a cover unless p is an ancestor of another parent of j
            if not any((ancestors[q, p >> 3] >> (7 - (p & 7))) & 1 for q in ps if q != p):
                covers.append((int(p), int(j)))
    # reach[a, b] = ancestors[b, a]: transpose through the unpacked matrix, one block at a time
    reach = np.zeros_like(ancestors)
    block = 512
    for start in range(0, n, block):
        cols = np.unpackbits(ancestors[start:start + block], axis=1, count=n)  # (blk, n)
        reach[:, start // 8:(start + cols.shape[0] + 7) // 8] = np.packbits(cols.T, axis=1)
    return reach, covers


def _draw_distinct(n: int, size: int, exclude_positive, rng: np.random.Generator) -> np.ndarray:
    """``size`` distinct ordered pairs without self pairs, optionally only negative ones."""
    chosen: dict[tuple[int, int], None] = {}
    while len(chosen) < size:
        batch = max(2 * (size - len(chosen)), 64)
        a = rng.integers(0, n, batch)
        b = rng.integers(0, n - 1, batch)
        b = b + (b >= a)  # never a self pair
        keep = ~exclude_positive(a, b) if exclude_positive is not None else np.ones(batch, bool)
        for x, y in zip(a[keep].tolist(), b[keep].tolist(), strict=True):
            chosen.setdefault((x, y))
            if len(chosen) == size:
                break
    return np.array(list(chosen), dtype=np.int64).reshape(-1, 2)


def random_order(
    n: int,
    pool_size: int,
    *,
    degree: float = 2.0,
    depth: int = 6,
    skip: float = 0.2,
    positive_share: float | None = None,
    random_state=None,
) -> GeneratedOrder:
    """Draw a random strict order on ``range(n)`` and a pool of its pairs.

    Parameters
    ----------
    n : int
        Number of concepts (at least 2).
    pool_size : int
        Number of distinct candidate pairs in the pool (at most ``n (n - 1)``).
    degree : float, default 2.0
        Expected number of parents of a concept above level 0 (the density knob).
    depth : int, default 6
        Number of levels: the longest chain has at most ``depth`` concepts.
    skip : float, default 0.2
        Probability that a parent is drawn from any lower level rather than the one just below
        (such edges may be implied by others, so the covers are computed, not assumed).
    positive_share : float, optional
        Share of positive pairs in the pool (capped by how many positives exist). By default
        the pool is drawn uniformly from all ordered pairs.
    random_state : int or numpy.random.Generator, optional
        Seed: the same seed gives the same order and pool.

    Returns
    -------
    GeneratedOrder

    Examples
    --------
    >>> order = random_order(50, 200, positive_share=0.3, random_state=0)
    >>> order.pool.shape, int(order.labels.sum())
    ((200, 2), 60)
    >>> bool(order.is_positive(*order.covers[0]))
    True
    """
    if n < 2:
        raise ValueError("an order with a pool needs at least 2 concepts")
    if not 0 <= pool_size <= n * (n - 1):
        raise ValueError(f"pool_size must be within 0 .. n(n-1) = {n * (n - 1)}")
    if depth < 1:
        raise ValueError("depth must be at least 1")
    rng = np.random.default_rng(random_state)
    depth = min(depth, n)  # so that no level is empty
    levels = _levels(n, depth, rng)
    by_level = [np.flatnonzero(levels == lv) for lv in range(depth)]
    parents = [_parents(levels[j], by_level, degree, skip, rng) for j in range(n)]
    reach, covers = _reachability(n, levels, parents)
    order = GeneratedOrder(tuple(range(n)), np.array(covers, dtype=np.int64).reshape(-1, 2),
                           reach, np.empty((0, 2), np.int64), np.empty(0, bool))
    pool = _pool(order, pool_size, positive_share, rng)
    labels = order.is_positive(pool[:, 0], pool[:, 1]) if len(pool) else np.empty(0, bool)
    return GeneratedOrder(order.concepts, order.covers, reach, pool, np.asarray(labels, bool))


def _pool(order: GeneratedOrder, size: int, positive_share, rng) -> np.ndarray:
    n = order.n
    if positive_share is None:
        if size > n * (n - 1) // 2:  # dense pool: draw the complement's indices exactly
            flat = rng.choice(n * (n - 1), size=size, replace=False)
            a, r = np.divmod(flat, n - 1)
            return np.column_stack([a, r + (r >= a)]).astype(np.int64)
        return _draw_distinct(n, size, None, rng)
    if not 0 <= positive_share <= 1:
        raise ValueError("positive_share must be within [0, 1]")
    positives = order.positive_pairs()
    n_pos = min(int(round(positive_share * size)), len(positives))
    n_neg = size - n_pos
    if n_neg > n * (n - 1) - len(positives):
        raise ValueError("not enough negative pairs for this pool size and positive share")
    pos = positives[rng.choice(len(positives), size=n_pos, replace=False)]
    neg = _draw_distinct(n, n_neg, order.is_positive, rng) if n_neg else np.empty((0, 2), np.int64)
    pool = np.concatenate([pos, neg])
    return pool[rng.permutation(len(pool))]
