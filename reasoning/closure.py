"""The exact deductive closure of strict-order labels.

A label on the pair ``(a, b)`` is *positive* when ``a`` precedes ``b`` (``a ≺ b``) and *negative*
otherwise. Because ``≺`` is a strict partial order, every label decides other pairs through the
four completeness rules of Liang et al. (2018), Definition 2. :class:`Closure` keeps the complete
set ``H`` of decided pairs and adds one label at a time with the closed form of
``docs/design/closure.md``:

* negative ``(a, b)`` decides ``D*(a) × A*(b)`` negative;
* positive ``(a, b)`` decides ``A*(a) × D*(b)`` positive and
  ``D*(b) × NR*(a)  ∪  NC*(b) × A*(a)`` negative,

where ``A*``/``D*`` are ancestors/descendants including the concept itself and ``NR*(a)``,
``NC*(b)`` the negative row of ``a`` and column of ``b`` (each with the concept itself).

Each relation is kept twice, by rows and by columns, as Python integers used as bitsets, so one
label costs the rows of those products times ``n / 64`` machine words, and never depends on |H|.
The asserted positive labels also live in a :class:`networkx.DiGraph`, which answers the path
questions (proofs, the transitive reduction).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import scipy.sparse as sp

__all__ = [
    "Cause",
    "Closure",
    "ContradictionError",
    "InvalidLabelError",
    "Label",
    "Line",
    "Proof",
    "ReasoningError",
    "Status",
    "Update",
    "bit_positions",
]

Concept = Hashable


class ReasoningError(Exception):
    """Base class of the errors of the reasoning core."""


class InvalidLabelError(ReasoningError, ValueError):
    """A label that cannot be stated: a self pair, or a concept the closure does not know."""


@dataclass(frozen=True)
class Label:
    """An asserted label: ``positive`` is True when ``a`` is a prerequisite of ``b``."""

    a: Concept
    b: Concept
    positive: bool


@dataclass(frozen=True)
class Proof:
    """Why ``(a, b)`` has the value ``positive``: asserted labels and the chains through them.

    ``labels`` holds only asserted labels; ``chains`` holds the paths of asserted positive labels
    used (each a tuple of concepts, consecutive ones joined by an asserted positive label).
    """

    a: Concept
    b: Concept
    positive: bool
    labels: tuple[Label, ...]
    chains: tuple[tuple[Concept, ...], ...] = ()


@dataclass(frozen=True)
class Status:
    """The state of one pair: ``value`` is True/False when decided, None when undecided."""

    value: bool | None
    asserted: bool


Line = tuple[bool, int, int]
"""What one label decided in one line of a relation: ``(by_row, index, bits)``.

A row (``by_row``) holds the pairs ``(index, y)`` for the set bits ``y``; a column the pairs
``(x, index)``. Indices are the closure's concept indices.
"""


@dataclass(frozen=True)
class Update:
    """What one asserted label changed, as lines of new pairs (never one object per pair).

    ``lines`` holds the positive and the negative lines it newly decided, its own pair included
    when that was undecided before (``own_new``); ``n_positive``/``n_negative`` count the
    pairs other than its own, and :attr:`positive`/:attr:`negative` list them (materialised on
    demand: a label joining two long chains decides millions). ``recorded`` is False when
    exactly this label had already been asserted (a no-op).
    """

    label: Label
    lines: tuple[tuple[Line, ...], tuple[Line, ...]] = ((), ())
    names: Sequence[Concept] = ()
    recorded: bool = True
    own_new: bool = False

    @property
    def n_positive(self) -> int:
        """How many pairs other than its own it decided positive."""
        return sum(bits.bit_count() for _, _, bits in self.lines[0]) - (
            self.own_new and self.label.positive)

    @property
    def n_negative(self) -> int:
        """How many pairs other than its own it decided negative."""
        return sum(bits.bit_count() for _, _, bits in self.lines[1]) - (
            self.own_new and not self.label.positive)

    def pairs(self, positive: bool, limit: int | None = None
              ) -> Iterator[tuple[Concept, Concept]]:
        """The pairs other than its own newly decided ``positive`` (at most ``limit``)."""
        names, own = self.names, (self.label.a, self.label.b)
        left = -1 if limit is None else limit
        for by_row, index, bits in self.lines[0 if positive else 1]:
            for other in bit_positions(bits):
                pair = (names[index], names[other]) if by_row else (names[other], names[index])
                if pair == own:
                    continue
                if left == 0:
                    return
                left -= 1
                yield pair

    @property
    def positive(self) -> list[tuple[Concept, Concept]]:
        """Every pair it newly decided positive, other than its own."""
        return list(self.pairs(True))

    @property
    def negative(self) -> list[tuple[Concept, Concept]]:
        """Every pair it newly decided negative, other than its own."""
        return list(self.pairs(False))


@dataclass(frozen=True)
class Cause:
    """Why a pair is decided, in a replay of labels (:meth:`Closure.replay`).

    ``caused_by`` is the position of the first label whose application decided the pair;
    ``asserted_by`` the position of the label asserted on the pair itself (None if inferred).
    """

    positive: bool
    caused_by: int
    asserted_by: int | None = None


class ContradictionError(ReasoningError):
    """A label that contradicts the closure; ``proof`` derives the opposite label."""

    def __init__(self, label: Label, proof: Proof) -> None:
        self.label = label
        self.proof = proof
        opposite = "positive" if proof.positive else "negative"
        super().__init__(
            f"({label.a!r}, {label.b!r}) is already {opposite}, forced by "
            f"{len(proof.labels)} asserted label(s)"
        )


_SMALL = 48  # below this many set bits, peeling bits in Python beats a numpy round trip


def bit_positions(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``, ascending (a bitset row's members).

    Examples
    --------
    >>> bit_positions(0b10110)
    [1, 2, 4]
    """
    if not mask & (mask - 1):  # zero or one bit: the common case of a sparse order
        return [mask.bit_length() - 1] if mask else []
    if mask.bit_count() <= _SMALL:
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return out
    raw = np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()


def _to_dense(rows: list[int], n: int) -> np.ndarray:
    """Bitset rows as an ``n × n`` boolean matrix."""
    width = (n + 7) // 8
    if n == 0:
        return np.zeros((0, 0), dtype=bool)
    raw = np.frombuffer(b"".join(r.to_bytes(width, "little") for r in rows), dtype=np.uint8)
    return np.unpackbits(raw.reshape(n, width), axis=1, bitorder="little")[:, :n].astype(bool)


def _merged(lines: list[Line]) -> tuple[Line, ...]:
    """``lines`` with the lines of one side and index joined (their pairs are disjoint)."""
    merged: dict[tuple[bool, int], int] = {}
    for by_row, index, bits in lines:
        key = (by_row, index)
        merged[key] = merged.get(key, 0) | bits
    return tuple((by_row, index, bits) for (by_row, index), bits in merged.items())


class Closure:
    """The complete set of pairs decided by asserted strict-order labels.

    Parameters
    ----------
    concepts : iterable of hashable, optional
        The concepts known from the start; more can be added with :meth:`add_concept`.

    Notes
    -----
    A concept is addressed two ways: by the concept itself (the hashable given here, e.g. a
    name or a database id: :meth:`status`, :meth:`add_label`, :meth:`proof`) or by its
    *index*, its position in :attr:`concepts` (:meth:`index` maps one to the other). Only the
    array queries go by index (:meth:`values_by_index`, :meth:`matrices`, :meth:`relation`),
    so that a whole pool is read without a dictionary look-up per pair.

    Examples
    --------
    >>> c = Closure(["limit", "derivative", "integral"])
    >>> c.add_label("limit", "derivative", True).negative
    [('derivative', 'limit')]
    >>> c.add_label("derivative", "integral", True).positive
    [('limit', 'integral')]
    >>> c.status("integral", "limit")
    Status(value=False, asserted=False)
    """

    def __init__(self, concepts: Iterable[Concept] = ()) -> None:
        self._names: list[Concept] = []
        self._index: dict[Concept, int] = {}
        self._down: list[int] = []  # _down[x]: strict descendants of x (row x of P)
        self._up: list[int] = []  # _up[y]: strict ancestors of y (column y of P)
        self._nrow: list[int] = []  # _nrow[x]: {y : (x, y) negative}
        self._ncol: list[int] = []  # _ncol[y]: {x : (x, y) negative}
        self._asserted_neg: list[int] = []  # _asserted_neg[u]: {v : (u, v) asserted negative}
        self._asserted: dict[tuple[int, int], bool] = {}
        self._graph = nx.DiGraph()
        self.n_positive = 0
        self.n_negative = 0
        self._forget_rows()
        for concept in concepts:
            self.add_concept(concept)

    # ------------------------------------------------------------------ concepts
    def add_concept(self, concept: Concept) -> int:
        """Add ``concept`` if it is new; return its index."""
        index = self._index.get(concept)
        if index is not None:
            return index
        index = len(self._names)
        self._names.append(concept)
        self._index[concept] = index
        for table in (self._down, self._up, self._nrow, self._ncol, self._asserted_neg):
            table.append(0)
        self._graph.add_node(concept)
        return index

    @property
    def concepts(self) -> list[Concept]:
        """The concepts in index order."""
        return list(self._names)

    @property
    def n(self) -> int:
        """The number of concepts."""
        return len(self._names)

    def index(self, concept: Concept) -> int:
        """The index of ``concept``; :class:`InvalidLabelError` when unknown."""
        try:
            return self._index[concept]
        except (KeyError, TypeError):
            raise InvalidLabelError(f"unknown concept {concept!r}") from None

    @property
    def graph(self) -> nx.DiGraph:
        """The asserted positive labels as a directed graph over every concept (do not mutate)."""
        return self._graph

    @property
    def asserted(self) -> dict[tuple[Concept, Concept], bool]:
        """The asserted labels, in the order they were asserted (a copy)."""
        names = self._names
        return {(names[i], names[j]): v for (i, j), v in self._asserted.items()}

    def asserted_labels(self) -> list[Label]:
        """The asserted labels as :class:`Label` objects, in assertion order."""
        names = self._names
        return [Label(names[i], names[j], v) for (i, j), v in self._asserted.items()]

    # ------------------------------------------------------------------ queries
    def _value(self, i: int, j: int) -> bool | None:
        if self._down[i] >> j & 1:
            return True
        if self._nrow[i] >> j & 1:
            return False
        return None

    def _pair(self, a: Concept, b: Concept) -> tuple[int, int]:
        i, j = self.index(a), self.index(b)
        if i == j:
            raise InvalidLabelError(f"a pair needs two different concepts, got ({a!r}, {a!r})")
        return i, j

    def status(self, a: Concept, b: Concept) -> Status:
        """Whether ``(a, b)`` is positive, negative or undecided, and whether it was asserted.

        ``a`` and ``b`` are concepts (as given to the closure), not indices;
        :meth:`values_by_index` reads many pairs by index."""
        i, j = self._pair(a, b)
        return Status(self._value(i, j), (i, j) in self._asserted)

    def values_by_index(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        """Values of the index pairs ``(ia[k], ib[k])``: 1 positive, 0 negative, -1 undecided.

        ``ia`` and ``ib`` are concept *indices* (positions in :attr:`concepts`), not
        concepts; :meth:`status` reads one pair by its concepts."""
        ia, ib = np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)
        out = np.full(len(ia), -1, dtype=np.int8)
        if len(ia) == 0:
            return out
        if self.n <= 2048:  # unpacking every row beats a Python loop over the pairs
            positive, negative = self.matrices()
            out[negative[ia, ib]] = 0
            out[positive[ia, ib]] = 1
            return out
        out[np.asarray(self.relation(False)[ia, ib]).ravel() > 0] = 0
        out[np.asarray(self.relation(True)[ia, ib]).ravel() > 0] = 1
        return out

    def positive_pairs(self) -> Iterator[tuple[Concept, Concept]]:
        """Every positive pair of the closure."""
        names = self._names
        for x, row in enumerate(self._down):
            for y in bit_positions(row):
                yield names[x], names[y]

    def negative_pairs(self) -> Iterator[tuple[Concept, Concept]]:
        """Every negative pair of the closure."""
        names = self._names
        for x, row in enumerate(self._nrow):
            for y in bit_positions(row):
                yield names[x], names[y]

    def decided(self) -> Iterator[tuple[Concept, Concept, bool, bool]]:
        """Every decided pair as ``(a, b, positive, asserted)``."""
        asserted = self._asserted
        names = self._names
        for table, value in ((self._down, True), (self._nrow, False)):
            for x, row in enumerate(table):
                for y in bit_positions(row):
                    yield names[x], names[y], value, (x, y) in asserted

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """The positive and negative relations as dense boolean ``n × n`` matrices."""
        return _to_dense(self._down, self.n), _to_dense(self._nrow, self.n)

    def reach(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """The bitset rows ``(down, up, nrow, ncol)`` (read-only views for the gain code)."""
        return self._down, self._up, self._nrow, self._ncol

    # ------------------------------------------------------------------ as sparse matrices
    def _forget_rows(self) -> None:
        """Drop the cached row arrays (the relations were replaced wholesale)."""
        self._row_arrays: dict[bool, list[np.ndarray] | None] = {True: None, False: None}
        self._dirty = {True: 0, False: 0}
        self._matrices: dict[bool, sp.csr_matrix | None] = {True: None, False: None}

    def _touched(self, positive: bool, lines: Iterable[Line]) -> None:
        """Rows of a relation that ``lines`` changed (a column line changes its bits' rows)."""
        dirty = 0
        for by_row, index, bits in lines:
            dirty |= 1 << index if by_row else bits
        if dirty:
            self._dirty[positive] |= dirty
            self._matrices[positive] = None

    def relation(self, positive: bool) -> sp.csr_matrix:
        """The positive (or negative) relation as a 0/1 ``n × n`` CSR matrix.

        Kept row by row: each row's indices are cached and only the rows a label changed are
        read again, so asking after every label costs the rows that changed plus one
        concatenation, not a walk over every row (1 s at 100,000 concepts). Do not mutate.
        """
        cached = self._matrices[positive]
        if cached is not None and cached.shape[0] == self.n:
            return cached
        table = self._down if positive else self._nrow
        arrays = self._row_arrays[positive]
        if arrays is None:
            arrays = [np.array(bit_positions(row), dtype=np.int32) for row in table]
        else:
            empty = np.zeros(0, dtype=np.int32)
            arrays.extend(empty for _ in range(self.n - len(arrays)))
            for x in bit_positions(self._dirty[positive]):
                arrays[x] = np.array(bit_positions(table[x]), dtype=np.int32)
        self._row_arrays[positive], self._dirty[positive] = arrays, 0
        lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=self.n)
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        indices = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int32)
        matrix = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(self.n, self.n))
        matrix.has_sorted_indices = True
        self._matrices[positive] = matrix
        return matrix

    def query_bounds(self) -> tuple[int, int]:
        """Theorem 2's bounds on the queries that label the positive relation.

        The size of its transitive reduction (every cover pair must be asked) and of the
        positive closure (no more than every positive pair).
        """
        reduction = nx.transitive_reduction(self._graph)
        return reduction.number_of_edges(), self.n_positive

    # ------------------------------------------------------------------ proofs
    def _path(self, i: int, j: int) -> list[int]:
        names = self._names
        path = nx.shortest_path(self._graph, names[i], names[j])
        return [self._index[c] for c in path]

    def _chain_labels(self, path: list[int]) -> list[Label]:
        names = self._names
        return [Label(names[x], names[y], True) for x, y in zip(path, path[1:], strict=False)]

    def _proof(self, i: int, j: int) -> Proof | None:
        names = self._names
        value = self._value(i, j)
        if value is None:
            return None
        if value:
            path = self._path(i, j)
            return Proof(names[i], names[j], True, tuple(self._chain_labels(path)),
                         (tuple(names[x] for x in path),))
        if self._asserted.get((i, j)) is False:
            return Proof(names[i], names[j], False, (Label(names[i], names[j], False),))
        if self._down[j] >> i & 1:  # rule (iv): j ≺ i
            path = self._path(j, i)
            return Proof(names[i], names[j], False, tuple(self._chain_labels(path)),
                         (tuple(names[x] for x in path),))
        # rules (ii)/(iii): an asserted negative (u, v) with u ⪯ i and j ⪯ v
        targets = self._down[j] | 1 << j
        for u in bit_positions(self._up[i] | 1 << i):
            hit = self._asserted_neg[u] & targets
            if hit:
                v = (hit & -hit).bit_length() - 1
                labels = [Label(names[u], names[v], False)]
                chains = []
                if u != i:
                    path = self._path(u, i)
                    labels += self._chain_labels(path)
                    chains.append(tuple(names[x] for x in path))
                if v != j:
                    path = self._path(j, v)
                    labels += self._chain_labels(path)
                    chains.append(tuple(names[x] for x in path))
                return Proof(names[i], names[j], False, tuple(labels), tuple(chains))
        raise AssertionError(f"negative pair ({i}, {j}) has no derivation")  # pragma: no cover

    def proof(self, a: Concept, b: Concept) -> Proof | None:
        """The asserted labels that decide ``(a, b)``, or None when it is undecided."""
        return self._proof(*self._pair(a, b))

    # ------------------------------------------------------------------ adding labels
    def add_label(self, a: Concept, b: Concept, positive: bool) -> Update:
        """Assert a label and return the pairs it newly decides.

        Raises
        ------
        InvalidLabelError
            For a self pair or an unknown concept.
        ContradictionError
            When the closure already holds the opposite label; nothing changes.
        """
        i, j = self._pair(a, b)
        positive = bool(positive)
        label = Label(a, b, positive)
        current = self._value(i, j)
        if current is not None:
            if current != positive:
                proof = self._proof(i, j)
                assert proof is not None
                raise ContradictionError(label, proof)
            if (i, j) in self._asserted:
                return Update(label, recorded=False)
            self._record(i, j, positive)
            return Update(label)
        self._record(i, j, positive)
        pos, neg = self._add_positive(i, j) if positive else ((), self._add_negative(i, j))
        return Update(label, (pos, neg), self._names, own_new=True)

    def growth(self, a: Concept, b: Concept, positive: bool) -> int:
        """How many pairs asserting ``(a, b)`` would newly decide, without deciding them.

        The product sets of closure.md are counted row by row with popcounts, so the cost is
        that of the rows the label would touch, and nothing is materialised: a service can
        refuse a label that would grow the closure past a budget before doing the work.
        0 for a pair already decided (either way).

        Examples
        --------
        >>> c = Closure("abc")
        >>> c.add_label("a", "b", True).positive, c.growth("b", "c", True)
        ([], 4)
        """
        i, j = self._pair(a, b)
        if self._value(i, j) is not None:
            return 0
        down, nrow = self._down, self._nrow
        if not positive:
            cols = self._up[j] | 1 << j
            return sum((cols & ~nrow[x]).bit_count() for x in bit_positions(down[i] | 1 << i))
        anc, desc = self._up[i] | 1 << i, down[j] | 1 << j
        neg_row, neg_col = nrow[i] | 1 << i, self._ncol[j] | 1 << j
        new = sum((desc & ~down[x]).bit_count() for x in bit_positions(anc))
        for x in bit_positions(desc | neg_col):
            cols = (neg_row if desc >> x & 1 else 0) | (anc if neg_col >> x & 1 else 0)
            new += (cols & ~nrow[x]).bit_count()
        return new

    def _record(self, i: int, j: int, positive: bool) -> None:
        self._asserted[(i, j)] = positive
        if positive:
            self._graph.add_edge(self._names[i], self._names[j])
        else:
            self._asserted_neg[i] |= 1 << j

    @staticmethod
    def _fill(by_row: list[int], by_col: list[int], rows: int, cols: int,
              row_side: bool = True) -> list[Line]:
        """Set ``rows × cols`` in a relation kept by rows and by columns; return the new lines.

        The loop runs over the smaller side, and the new pairs come back as lines of that side
        (rows, or columns when transposed): the product costs min(|rows|, |cols|) bitset
        operations, plus one per line of the other side that changed.
        """
        if rows.bit_count() > cols.bit_count():  # the same work on the transposed relation
            return Closure._fill(by_col, by_row, cols, rows, not row_side)
        lines: list[Line] = []
        changed = 0
        for x in bit_positions(rows):
            add = cols & ~by_row[x]
            if add:
                by_row[x] |= add
                changed |= add
                lines.append((row_side, x, add))
        for y in bit_positions(changed):
            by_col[y] |= rows
        return lines

    def _negate(self, rows: int, cols: int) -> list[Line]:
        """Make ``rows × cols`` negative; return the lines of pairs not negative yet."""
        new = self._fill(self._nrow, self._ncol, rows, cols)
        self.n_negative += sum(bits.bit_count() for _, _, bits in new)
        self._touched(False, new)
        return new

    def _add_negative(self, i: int, j: int) -> tuple[Line, ...]:
        return tuple(self._negate(self._down[i] | 1 << i, self._up[j] | 1 << j))

    def _add_positive(self, i: int, j: int) -> tuple[tuple[Line, ...], tuple[Line, ...]]:
        anc = self._up[i] | 1 << i  # A*(a)
        desc = self._down[j] | 1 << j  # D*(b)
        neg_row = self._nrow[i] | 1 << i  # NR*(a), read before anything changes
        neg_col = self._ncol[j] | 1 << j  # NC*(b)
        pos = self._fill(self._down, self._up, anc, desc)
        self.n_positive += sum(bits.bit_count() for _, _, bits in pos)
        self._touched(True, pos)
        return tuple(pos), _merged(self._negate(desc, neg_row) + self._negate(neg_col, anc))

    # ------------------------------------------------------------------ whole sets
    @classmethod
    def from_labels(cls, labels: Iterable[Label | tuple[Concept, Concept, bool]],
                    concepts: Iterable[Concept] = ()) -> Closure:
        """The closure of a whole set of labels, built at once.

        Uses ``P`` = the transitive closure of the asserted positives and
        ``N = Rᵀ·B·Rᵀ ∪ Pᵀ`` (closure.md). When the labels contradict each other they are
        replayed one by one so that the :class:`ContradictionError` names the first label, in
        the given order, that contradicts the ones before it.
        """
        items = [lab if isinstance(lab, Label) else Label(*lab) for lab in labels]
        closure = cls.closed(items, concepts)
        if closure is None:
            replay = cls(concepts)
            for lab in items:
                replay.add_concept(lab.a)
                replay.add_concept(lab.b)
                replay.add_label(lab.a, lab.b, lab.positive)
            raise AssertionError("bulk build and replay disagree")  # pragma: no cover
        return closure

    @classmethod
    def closed(cls, labels: Iterable[Label], concepts: Iterable[Concept] = ()) -> Closure | None:
        """The closure of a whole set of labels built at once, or None if they contradict.

        Costs the rows of the closure (``n²/64`` words), whatever the order of the labels.
        """
        items = list(labels)
        closure = cls(concepts)
        for lab in items:
            closure.add_concept(lab.a)
            closure.add_concept(lab.b)
        return closure if closure._bulk(items) else None

    def _bulk(self, items: list[Label]) -> bool:
        """Fill an empty closure from ``items``; False when they are contradictory."""
        asserted: dict[tuple[int, int], bool] = {}
        for lab in items:
            i, j = self._pair(lab.a, lab.b)
            if asserted.setdefault((i, j), lab.positive) != lab.positive:
                return False
        graph = nx.DiGraph()
        graph.add_nodes_from(range(self.n))
        graph.add_edges_from(p for p, v in asserted.items() if v)
        try:
            order = list(nx.topological_sort(graph))
        except nx.NetworkXUnfeasible:
            return False
        down, up = self._down, self._up
        for x in reversed(order):
            row = 0
            for s in graph.successors(x):
                row |= down[s] | 1 << s
            down[x] = row
        for y in order:
            col = 0
            for p in graph.predecessors(y):
                col |= up[p] | 1 << p
            up[y] = col
        nrow = list(up)  # rule (iv): (x, y) is negative when y ≺ x
        ncol = list(down)
        for (u, v), value in asserted.items():
            if not value:
                rows, cols = down[u] | 1 << u, up[v] | 1 << v
                for x in bit_positions(rows):
                    nrow[x] |= cols
                for y in bit_positions(cols):
                    ncol[y] |= rows
                self._asserted_neg[u] |= 1 << v
        if any(nrow[x] & down[x] for x in range(self.n)):
            return False
        self._nrow, self._ncol = nrow, ncol
        self._forget_rows()
        self._asserted = asserted
        names = self._names
        self._graph.add_edges_from((names[i], names[j]) for (i, j), v in asserted.items() if v)
        self.n_positive = sum(r.bit_count() for r in down)
        self.n_negative = sum(r.bit_count() for r in nrow)
        return True

    @classmethod
    def replay(cls, labels: Iterable[Label], concepts: Iterable[Concept] = ()
               ) -> tuple[Closure, dict[tuple[Concept, Concept], Cause]]:
        """The closure of ``labels`` applied one by one, with the cause of every decided pair.

        Returns the closure and, per decided pair, its :class:`Cause`: the position (in
        ``labels``) of the first label whose application decided it, and of the label asserted
        on the pair itself, if any. One object per decided pair: for small closures (tests,
        reports); :meth:`replay_effects` gives the same as lines.

        Examples
        --------
        >>> closure, causes = Closure.replay([Label("a", "b", True), Label("b", "c", True)])
        >>> causes[("a", "c")]
        Cause(positive=True, caused_by=1, asserted_by=None)
        """
        items = list(labels)
        closure, updates = cls.replay_effects(items, concepts)
        causes: dict[tuple[Concept, Concept], Cause] = {}
        names = closure._names
        for position, update in enumerate(updates):
            for value, lines in ((True, update.lines[0]), (False, update.lines[1])):
                for by_row, index, bits in lines:
                    for other in bit_positions(bits):
                        pair = (names[index], names[other]) if by_row else \
                            (names[other], names[index])
                        causes[pair] = Cause(value, position)
        for position, lab in enumerate(items):
            pair = (lab.a, lab.b)
            first = causes[pair]
            causes[pair] = Cause(first.positive, first.caused_by, position)
        return closure, causes

    @classmethod
    def replay_effects(cls, labels: Iterable[Label], concepts: Iterable[Concept] = ()
                       ) -> tuple[Closure, list[Update]]:
        """The closure of ``labels`` applied one by one, and what each one decided.

        ``updates[k]`` holds the lines label ``k`` newly decided, its own pair included (empty
        when the pair was decided already, ``recorded`` False for a repeated label). When the
        order is *canonical* (:meth:`canonical_order`: every positive label before every
        negative one, each positive applied after every positive label below its head and
        before any above its tail), the positives are closed at once and each decided exactly
        one row and one column, read off the closure: a chain of 20,000 concepts costs its
        rows, not the 2×10⁸ pairs of replaying it. Otherwise the labels are applied one by one.
        Raises :class:`ContradictionError` for the first label that contradicts the ones
        before it.

        Examples
        --------
        >>> closure, updates = Closure.replay_effects(
        ...     [Label("b", "c", True), Label("a", "b", True)])
        >>> [sorted(u.positive) for u in updates]
        [[], [('a', 'c')]]
        """
        items = list(labels)
        closure = cls(concepts)
        for lab in items:
            closure.add_concept(lab.a)
            closure.add_concept(lab.b)
        fast = closure._replay_canonical(items)
        if fast is not None:
            return closure, fast
        return closure, [closure.add_label(lab.a, lab.b, lab.positive) for lab in items]

    def _replay_canonical(self, items: list[Label]) -> list[Update] | None:
        """Apply ``items`` to this empty closure if their order is canonical, else None."""
        if self._asserted or len(items) < 2:
            return None
        first_negative = next((k for k, lab in enumerate(items) if not lab.positive), len(items))
        if any(lab.positive for lab in items[first_negative:]):
            return None
        positives = items[:first_negative]
        index = self._index
        seen_pairs: dict[tuple[int, int], bool] = {}
        for lab in items:
            pair = (index[lab.a], index[lab.b])
            if pair[0] == pair[1] or seen_pairs.setdefault(pair, lab.positive) != lab.positive:
                return None
        scratch = Closure(self._names)
        if not scratch._bulk(positives):
            return None
        down, up = scratch._down, scratch._up
        # canonical: no earlier head at or above a tail, no later tail at or below a head
        pending = [0] * self.n
        pending_mask = 0
        for lab in positives:
            i = index[lab.a]
            pending[i] += 1
            pending_mask |= 1 << i
        heads = 0
        for lab in positives:
            i, j = index[lab.a], index[lab.b]
            pending[i] -= 1
            if not pending[i]:
                pending_mask &= ~(1 << i)
            if (up[i] | 1 << i) & heads or (down[j] | 1 << j) & pending_mask:
                return None
            heads |= 1 << j
        self._down, self._up, self._nrow, self._ncol = down, up, list(up), list(down)
        self._forget_rows()
        self._asserted_neg = scratch._asserted_neg
        self._graph, self._asserted = scratch._graph, {}
        self.n_positive = self.n_negative = scratch.n_positive
        updates: list[Update] = []
        seen = [0] * self.n
        for lab in positives:
            i, j = index[lab.a], index[lab.b]
            label = Label(lab.a, lab.b, True)
            if (i, j) in self._asserted:
                updates.append(Update(label, recorded=False))
                continue
            self._asserted[(i, j)] = True
            new = (down[j] | 1 << j) & ~seen[i]
            seen[i] |= new
            updates.append(Update(label, (((True, i, new),), ((False, i, new),)), self._names,
                                  own_new=True) if new else Update(label))
        for lab in items[first_negative:]:
            updates.append(self.add_label(lab.a, lab.b, False))
        return updates

    @staticmethod
    def canonical_order(labels: Sequence[Label]) -> tuple[list[int], int] | None:
        """An order of ``labels`` that :meth:`replay_effects` closes fast, or None (a cycle).

        The positive labels come first, by their tails from the last concept of the order back
        (a tail's labels by decreasing reach of the head, so a label implied by the others
        comes after them), then the negative labels in the given order. Returns the positions
        into ``labels`` and the number of positive pairs the positive labels decide (so at
        least twice as many decided pairs: each has its negative mirror), known before any
        replay.

        Examples
        --------
        >>> Closure.canonical_order([Label("a", "b", True), Label("b", "c", True),
        ...                          Label("c", "a", False)])
        ([1, 0, 2], 3)
        """
        graph = nx.DiGraph()
        for lab in labels:
            graph.add_node(lab.a)
            graph.add_node(lab.b)
        graph.add_edges_from((lab.a, lab.b) for lab in labels if lab.positive)
        try:
            topo = {c: k for k, c in enumerate(nx.topological_sort(graph))}
        except nx.NetworkXUnfeasible:
            return None
        down: dict[Concept, int] = {}
        bit = {c: 1 << k for k, c in enumerate(topo)}
        for c in reversed(list(topo)):
            row = 0
            for s in graph.successors(c):
                row |= down[s] | bit[s]
            down[c] = row
        reach = {c: row.bit_count() for c, row in down.items()}
        positives = sorted((k for k, lab in enumerate(labels) if lab.positive),
                           key=lambda k: (-topo[labels[k].a], -reach[labels[k].b], k))
        return (positives + [k for k, lab in enumerate(labels) if not lab.positive],
                sum(reach.values()))

    def retract(self, a: Concept, b: Concept) -> Closure:
        """A new closure of every asserted label but the one on ``(a, b)``.

        Raises KeyError when ``(a, b)`` carries no asserted label.
        """
        return self.retract_explained(a, b)[0]

    def retract_explained(self, a: Concept, b: Concept, order: Iterable[Label] | None = None
                          ) -> tuple[Closure, dict[tuple[Concept, Concept], Cause]]:
        """The closure of every asserted label but the one on ``(a, b)``, with the causes.

        Retraction cannot be done by subtraction (a pair may have other derivations), so the
        rest is closed again (:meth:`replay`), in ``order`` (the asserted labels, default in
        the order they were added); the causes refer to positions in that order without the
        retracted label. Raises KeyError when ``(a, b)`` carries no asserted label.
        """
        i, j = self._pair(a, b)
        if (i, j) not in self._asserted:
            raise KeyError((a, b))
        labels = self.asserted_labels() if order is None else list(order)
        rest = [lab for lab in labels if (lab.a, lab.b) != (a, b)]
        return Closure.replay(rest, self._names)

    def copy(self) -> Closure:
        """An independent copy."""
        other = Closure.__new__(Closure)
        other._names = list(self._names)
        other._index = dict(self._index)
        other._down, other._up = list(self._down), list(self._up)
        other._nrow, other._ncol = list(self._nrow), list(self._ncol)
        other._asserted_neg = list(self._asserted_neg)
        other._asserted = dict(self._asserted)
        other._graph = self._graph.copy()
        other.n_positive, other.n_negative = self.n_positive, self.n_negative
        other._row_arrays = {k: None if v is None else list(v)
                             for k, v in self._row_arrays.items()}
        other._dirty = dict(self._dirty)
        other._matrices = dict(self._matrices)
        return other

    def __len__(self) -> int:
        """|H|: the number of decided pairs."""
        return self.n_positive + self.n_negative

    def __repr__(self) -> str:
        return (f"Closure(n={self.n}, asserted={len(self._asserted)}, "
                f"positive={self.n_positive}, negative={self.n_negative})")
