"""What the reliability tests share: a real `sporal serve` process, databases, an order, an oracle.

The tests drive the service the way a team does: a real server process on a free loopback
port, clients over HTTP in threads, and an independent recomputation of what the database
should hold. Nothing here imports the service: the tests see only its REST contract.
The server process and the PostgreSQL databases come from :mod:`benchmarks.serving`, shared
with the end-to-end tests and the benchmarks; they are re-exported here for the tests.
"""

from __future__ import annotations

import itertools
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from benchmarks.serving import Server, postgres_database

__all__ = [
    "POSTGRES_URL_VARIABLE",
    "Order",
    "Server",
    "closure_fixpoint",
    "create_project",
    "fetch_decided",
    "fetch_asserted",
    "generate_order",
    "postgres_database",
    "sqlite_url",
]

POSTGRES_URL_VARIABLE = "SPORAL_TEST_POSTGRES_URL"
ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# Databases
# --------------------------------------------------------------------------------------------


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file."""
    return f"sqlite:///{path}"


# --------------------------------------------------------------------------------------------
# A generated strict order and an independent closure
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Order:
    """A random strict partial order: concept names and the truth matrix ``less[i, j]``."""

    concepts: list[str]
    less: np.ndarray

    def label(self, a: str, b: str) -> str:
        i, j = self.index[a], self.index[b]
        return "positive" if self.less[i, j] else "negative"

    @property
    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.concepts)}


def generate_order(n: int, *, parents: int = 2, seed: int = 0) -> Order:
    """A random DAG on ``n`` concepts (each with up to ``parents`` earlier parents), closed.

    Names carry a space, a slash and a non-ASCII letter, which the contract allows, so the
    tests also cross the URL and JSON encoding of real names.
    """
    rng = random.Random(seed)
    ranks = list(range(n))
    rng.shuffle(ranks)
    less = np.zeros((n, n), dtype=bool)
    for position in range(1, n):
        child = ranks[position]
        for parent in rng.sample(ranks[:position], k=min(position, rng.randint(0, parents))):
            less[parent, child] = True
    less = _transitive_closure(less)
    return Order([f"concept {i:03d}/é" for i in range(n)], less)


def _transitive_closure(relation: np.ndarray) -> np.ndarray:
    """Warshall's algorithm, one pivot at a time."""
    closed = relation.copy()
    for k in range(closed.shape[0]):
        closed |= np.outer(closed[:, k], closed[k, :])
    return closed


def closure_fixpoint(
    concepts: list[str], labels: list[tuple[str, str, str]]
) -> dict[tuple[str, str], str]:
    """Every pair decided by ``labels`` under rules (i)-(iv), found by iterating the rules.

    Independent of the service's closed form: positives are the transitive closure of the
    asserted positives (Warshall); negatives start from the asserted negatives and grow by
    applying (ii), (iii) and (iv) as boolean matrix products until nothing changes.

    Raises
    ------
    AssertionError
        When the labels are contradictory (a cycle of positives, or a pair both ways): the
        service must never have stored such a set.
    """
    index = {name: i for i, name in enumerate(concepts)}
    n = len(concepts)
    positive = np.zeros((n, n), dtype=bool)
    negative = np.zeros((n, n), dtype=bool)
    for a, b, label in labels:
        (positive if label == "positive" else negative)[index[a], index[b]] = True
    positive = _transitive_closure(positive)  # rule (i)
    while True:
        pos, neg = positive.astype(np.int32), negative.astype(np.int32)
        grown = (
            negative
            | (pos.T @ neg > 0)  # (ii) a≺b ∧ (a,c)− ⇒ (b,c)−
            | (neg @ pos.T > 0)  # (iii) b≺c ∧ (a,c)− ⇒ (a,b)−
            | positive.T  # (iv) a≺b ⇒ (b,a)−
        )
        np.fill_diagonal(grown, False)  # (a, a) is no pair of the closure
        if np.array_equal(grown, negative):
            break
        negative = grown
    assert not positive.diagonal().any(), "the stored labels hold a cycle of positives"
    assert not (positive & negative).any(), "the stored labels contradict each other"
    decided: dict[tuple[str, str], str] = {}
    for i, j in zip(*np.nonzero(positive), strict=True):
        decided[concepts[i], concepts[j]] = "positive"
    for i, j in zip(*np.nonzero(negative), strict=True):
        decided[concepts[i], concepts[j]] = "negative"
    return decided


def sample_labels(
    order: Order, count: int, *, flip: float = 0.0, positive_share: float | None = None,
    seed: int = 0,
) -> list[tuple[str, str, str]]:
    """``count`` distinct random pairs with their true label, a fraction ``flip`` reversed.

    ``positive_share`` draws that fraction of the pairs among the true positives (a sparse
    order has few, and positives are what makes a closure grow); default: uniform draws.
    """
    rng = random.Random(seed)
    n = len(order.concepts)
    everything = list(itertools.permutations(range(n), 2))
    if positive_share is None:
        pairs = rng.sample(everything, k=count)
    else:
        positives = [(i, j) for i, j in everything if order.less[i, j]]
        pairs = rng.sample(positives, k=min(len(positives), round(count * positive_share)))
        rest = [pair for pair in everything if not order.less[pair]]
        pairs += rng.sample(rest, k=count - len(pairs))
        rng.shuffle(pairs)
    labels = []
    for i, j in pairs:
        truth = bool(order.less[i, j])
        value = truth != (rng.random() < flip)
        labels.append((order.concepts[i], order.concepts[j], "positive" if value else "negative"))
    return labels


# --------------------------------------------------------------------------------------------
# Talking to the service
# --------------------------------------------------------------------------------------------


def create_project(
    client: httpx.Client, concepts: list[str], *, name: str | None = None
) -> int:
    """A project with ``concepts`` registered; returns its id."""
    response = client.post("/projects", json={"name": name or f"p-{uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    pid = response.json()["id"]
    for start in range(0, len(concepts), 500):
        chunk = [{"name": c} for c in concepts[start:start + 500]]
        response = client.post(f"/projects/{pid}/concepts", json={"concepts": chunk})
        assert response.status_code == 201, response.text
    return int(pid)


def _paginate(client: httpx.Client, pid: int, params: dict[str, str]) -> list[dict]:
    items: list[dict] = []
    limit = 10_000
    while True:
        response = client.get(f"/projects/{pid}/labels",
                              params={**params, "limit": limit, "offset": len(items)})
        assert response.status_code == 200, response.text
        body = response.json()
        items.extend(body["items"])
        if not body["items"] or len(items) >= body["total"]:
            assert len(items) == body["total"], "the listing lost or repeated items"
            return items


def fetch_asserted(client: httpx.Client, pid: int) -> dict[tuple[str, str], dict]:
    """The live asserted labels, by pair; fails if a pair holds two live labels."""
    items = _paginate(client, pid, {"source": "asserted"})
    by_pair: dict[tuple[str, str], dict] = {}
    for item in items:
        pair = (item["a"], item["b"])
        assert pair not in by_pair, f"two live asserted labels for {pair}"
        by_pair[pair] = item
    return by_pair


def fetch_decided(client: httpx.Client, pid: int) -> dict[tuple[str, str], str]:
    """The whole stored closure (asserted and inferred), by pair."""
    decided: dict[tuple[str, str], str] = {}
    for item in _paginate(client, pid, {"source": "all"}):
        pair = (item["a"], item["b"])
        assert pair not in decided, f"the closure lists {pair} twice"
        decided[pair] = item["label"]
    return decided
