"""Reading a labeled domain in the AL-CPL layout (``DOMAIN.pairs``, ``DOMAIN.features``).

A positive row ``A,B`` of the files means *B is a prerequisite of A*; in this project a positive
pair ``(a, b)`` means *a precedes b*. Every row ``A,B`` is therefore read as the pair ``(B, A)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Domain", "domain_names", "load_domain"]


@dataclass(frozen=True)
class Domain:
    """One domain: its concepts, pool pairs (project direction), true labels and features.

    ``pairs[i]`` is ``(a, b)`` meaning "a is a prerequisite of b" when ``labels[i]`` is True.
    ``concepts`` lists every concept named by a pair, sorted by name.
    """

    name: str
    concepts: list[str]
    pairs: list[tuple[str, str]]
    labels: np.ndarray  # bool, shape (m,)
    features: np.ndarray  # float64, shape (m, f)

    def index_pairs(self) -> np.ndarray:
        """The pairs as an ``(m, 2)`` array of indices into :attr:`concepts`."""
        position = {c: i for i, c in enumerate(self.concepts)}
        return np.array([(position[a], position[b]) for a, b in self.pairs], dtype=np.int64)


def domain_names(folder: str | Path) -> list[str]:
    """The domains of a folder: every ``X`` with both ``X.pairs`` and ``X.features``."""
    folder = Path(folder)
    stems = (p.stem for p in folder.glob("*.pairs"))
    return sorted(s for s in stems if (folder / f"{s}.features").exists())


def _parse_features(line: str, lineno: int, path: Path) -> tuple[bool, dict[int, float]]:
    parts = line.split()
    if not parts:
        raise ValueError(f"{path}:{lineno}: empty line")
    label = float(parts[0]) > 0
    values: dict[int, float] = {}
    for item in parts[1:]:
        key, _, value = item.partition(":")
        values[int(key)] = float(value)
    return label, values


def load_domain(folder: str | Path, name: str) -> Domain:
    """Load ``name`` from ``folder``, turning each row ``A,B`` into the project pair ``(B, A)``.

    Examples
    --------
    >>> d = load_domain("../shared/datasets/al-cpl", "data_mining")  # doctest: +SKIP
    >>> i = d.pairs.index(("Conditional_probability", "Decision_tree_model"))  # doctest: +SKIP
    >>> bool(d.labels[i])  # doctest: +SKIP
    True
    """
    folder = Path(folder)
    pairs_path, features_path = folder / f"{name}.pairs", folder / f"{name}.features"
    if not pairs_path.exists() or not features_path.exists():
        raise FileNotFoundError(f"no domain {name!r} in {folder} (want {name}.pairs and .features)")
    rows = [r for r in pairs_path.read_text(encoding="utf-8").splitlines() if r.strip()]
    feature_text = features_path.read_text(encoding="utf-8")
    feature_lines = [ln for ln in feature_text.splitlines() if ln.strip()]
    if len(rows) != len(feature_lines):
        raise ValueError(f"{name}: {len(rows)} pairs but {len(feature_lines)} feature rows")
    pairs: list[tuple[str, str]] = []
    labels: list[bool] = []
    parsed: list[dict[int, float]] = []
    for lineno, (row, fline) in enumerate(zip(rows, feature_lines, strict=True), start=1):
        first, sep, second = row.partition(",")
        if not sep or not first or not second:
            raise ValueError(f"{pairs_path}:{lineno}: expected 'A,B', got {row!r}")
        pairs.append((second, first))  # row A,B with label 1: B is a prerequisite of A
        label, values = _parse_features(fline, lineno, features_path)
        labels.append(label)
        parsed.append(values)
    width = 1 + max((max(v) for v in parsed if v), default=-1)
    features = np.zeros((len(parsed), width), dtype=np.float64)
    for i, values in enumerate(parsed):
        for j, v in values.items():
            features[i, j] = v
    concepts = sorted({c for pair in pairs for c in pair})
    return Domain(name=name, concepts=concepts, pairs=pairs,
                  labels=np.array(labels, dtype=bool), features=features)
