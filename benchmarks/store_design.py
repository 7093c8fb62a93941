"""What a label writes to the closure store: lines by cause (ours) against rows per concept.

The issue that asked for the store suggested one row per concept and relation holding its
bitset, rewritten whenever a label changes it. Ours stores, per label, the lines (rows or
columns, whichever side is smaller) of the pairs it newly decided. Both are counted here on
the same label sequences, in the reasoning core alone (no server, no database):

* ``chain-import``: a chain of ``--chain`` concepts imported at once (the canonical order);
* ``chain-by-label``: a chain of ``--short-chain`` concepts labeled one label at a time, from
  its first pair to its last (the worst order for rows: each label extends every row above);
* ``order``: a generated sparse order of ``--concepts`` concepts (:mod:`benchmarks.scale`),
  ``--questions`` true answers on random pool pairs.

For each: labels, decided pairs, lines written (ours), rows rewritten (per-concept rows), and
their ratio; ``store_design.csv`` in ``--out``.

Run::

    python -m benchmarks.store_design --out /tmp/bench_store
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.scale import generate_order
from reasoning.closure import Closure, Label, Update

__all__ = ["count", "main"]


def _rows_changed(update: Update) -> int:
    """Rows of the two relations a per-concept store would rewrite for ``update``."""
    changed = 0
    for lines in update.lines:
        rows = 0
        for by_row, index, bits in lines:
            rows |= 1 << index if by_row else bits
        changed += rows.bit_count()
    return changed


def count(name: str, updates: Iterable[Update], seconds: float) -> dict[str, Any]:
    labels = lines = rows = pairs = 0
    for update in updates:
        labels += 1
        lines += len(update.lines[0]) + len(update.lines[1])
        rows += _rows_changed(update)
        pairs += update.n_positive + update.n_negative + int(update.own_new)
    return {"case": name, "labels": labels, "decided_pairs": pairs, "lines_written": lines,
            "rows_rewritten": rows, "rows_per_line": round(rows / max(lines, 1), 1),
            "seconds": round(seconds, 3)}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chain", type=int, default=20_000)
    parser.add_argument("--short-chain", type=int, default=2_000)
    parser.add_argument("--concepts", type=int, default=100_000)
    parser.add_argument("--pool", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=500)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []

    chain = [Label(k, k + 1, True) for k in range(args.chain - 1)]
    started = time.perf_counter()
    found = Closure.canonical_order(chain)
    assert found is not None
    _, updates = Closure.replay_effects([chain[k] for k in found[0]], range(args.chain))
    rows.append(count(f"chain-import {args.chain:,}", updates, time.perf_counter() - started))

    short = Closure(range(args.short_chain))
    started = time.perf_counter()
    updates = [short.add_label(k, k + 1, True) for k in range(args.short_chain - 1)]
    rows.append(count(f"chain-by-label {args.short_chain:,}", updates,
                      time.perf_counter() - started))

    order = generate_order(args.concepts, args.pool, seed=1)
    closure = Closure(range(args.concepts))
    rng = np.random.default_rng(2)
    updates = []
    started = time.perf_counter()
    for row in rng.permutation(len(order.pool)).tolist():
        if len(updates) == args.questions:
            break
        a, b = order.pool[row].tolist()
        if closure.status(a, b).value is None:
            updates.append(closure.add_label(a, b, order.precedes(a, b)))
    rows.append(count(f"order {args.concepts:,} concepts, {args.questions} answers", updates,
                      time.perf_counter() - started))

    with open(args.out / "store_design.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    width = max(len(r["case"]) for r in rows)
    print(f"{'case':<{width}}  {'labels':>7}  {'decided pairs':>14}  {'lines (ours)':>12}  "
          f"{'rows (per concept)':>18}  {'ratio':>7}")
    for r in rows:
        print(f"{r['case']:<{width}}  {r['labels']:>7,}  {r['decided_pairs']:>14,}  "
              f"{r['lines_written']:>12,}  {r['rows_rewritten']:>18,}  {r['rows_per_line']:>7}")
    print(f"wrote {args.out / 'store_design.csv'}")
    return rows


if __name__ == "__main__":
    main()
