"""Do the computed pair features carry signal, and how long do they take to compute?

Run from the repository root (one core)::

    python -m benchmarks.features --out /tmp/bench_features

Two measurements on generated corpora (:func:`reasoning.corpus.random_corpus`: a random strict
order, texts that mention some of each concept's prerequisites and related words, links that
follow the order with noise):

* **signal** — the paper's protocol (:func:`reasoning.simulation.auc.run_strategy`: a 2:1 split,
  20 random seed questions, then LC-R+ questions, the 200-tree forest's ROC AUC on the test
  pairs) after ``--queries`` (100) questions, once with the features of
  :mod:`reasoning.features` and once with pure noise of the same shape, on the same splits
  (``--repeats`` repeats of a corpus of ``--n`` concepts and a pool of ``--pool`` pairs).
  Written to ``signal.csv`` (``features,repeat,labeled,auc``).
* **time** — :func:`~reasoning.features.corpus_statistics` and
  :func:`~reasoning.features.pair_features` on ``--time-n`` concepts (2,000) with
  ``--time-words``-word texts (2,000) and ``--time-pool`` pool pairs (20,000). Written to
  ``time.csv``.

* **service** (with ``--service``) — the same corpus through the API in-process on a
  temporary SQLite file: the concepts with their texts, the links, then the pool pairs without
  features (computed by the service), and one more link (every pool pair computed again: in
  the request for a small project, else by a job, which is followed; its time is then the
  job's, from its start to its end, and ``link_answer_s`` the 202's). Written to
  ``service.csv``.

``summary.md`` holds them with the command line.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from reasoning.corpus import random_corpus
from reasoning.data import Domain
from reasoning.features import FEATURE_NAMES, corpus_statistics, pair_features
from reasoning.report import write_csv
from reasoning.simulation.auc import FOREST_TREES, run_strategy

__all__ = ["main", "measure_signal", "measure_time"]


def _domain(name: str, titles: list[str], pool: np.ndarray, labels: np.ndarray,
            features: np.ndarray) -> Domain:
    pairs = [(titles[a], titles[b]) for a, b in pool.tolist()]
    return Domain(name, list(titles), pairs, np.asarray(labels, bool), features)


def measure_signal(*, n: int, pool: int, words: int, repeats: int, queries: int,
                   forest_trees: int = FOREST_TREES, seed: int = 0) -> list[dict]:
    """AUC after ``queries`` LC-R+ questions with computed and with noise features."""
    rows = []
    for repeat in range(repeats):
        corpus = random_corpus(n, pool, words=words, random_state=[seed, repeat])
        stats = corpus_statistics(corpus.titles, corpus.texts, corpus.links)
        computed = pair_features(stats, corpus.order.pool)
        noise = np.random.default_rng([seed, repeat, 1]).normal(size=computed.shape)
        for kind, features in (("computed", computed), ("noise", noise)):
            domain = _domain(f"generated-{repeat}", corpus.titles, corpus.order.pool,
                             corpus.order.labels, features)
            points = run_strategy(domain, "LC-R+", repeat=repeat, seed=seed, queries=queries,
                                  eval_every=queries, forest_trees=forest_trees)
            rows.append({"features": kind, "repeat": repeat, "labeled": points[-1].labeled,
                         "auc": points[-1].auc})
    return rows


def measure_time(*, n: int, words: int, pool: int, seed: int = 0) -> dict:
    """Seconds to read a corpus and to compute the features of its pool."""
    start = time.perf_counter()
    corpus = random_corpus(n, pool, words=words, random_state=seed)
    generated = time.perf_counter() - start
    start = time.perf_counter()
    stats = corpus_statistics(corpus.titles, corpus.texts, corpus.links)
    statistics = time.perf_counter() - start
    start = time.perf_counter()
    features = pair_features(stats, corpus.order.pool)
    pairs = time.perf_counter() - start
    assert features.shape == (pool, len(FEATURE_NAMES)) and np.isfinite(features).all()
    return {"concepts": n, "words": words, "pool": pool,
            "text_words": int(stats.words.sum()), "links": int(stats.links.nnz),
            "generate_s": round(generated, 2), "corpus_statistics_s": round(statistics, 2),
            "pair_features_s": round(pairs, 2), "total_s": round(statistics + pairs, 2)}


def measure_service(*, n: int, words: int, pool: int, seed: int = 0) -> dict:
    """Seconds the API takes to store a corpus, register its pool and recompute it."""
    from fastapi.testclient import TestClient

    from app.db import migrate
    from app.main import create_app
    from app.settings import Settings

    corpus = random_corpus(n, pool, words=words, random_state=seed)
    titles = corpus.titles
    out: dict = {"concepts": n, "words": words, "pool": pool}
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/sporal.db"
        migrate(url)
        app = create_app(Settings(database_url=url, warm_up=False))
        with TestClient(app) as client:
            pid = client.post("/projects", json={"name": "features"}).json()["id"]

            def timed(name: str, path: str, body: dict) -> None:
                start = time.perf_counter()
                response = client.post(f"/projects/{pid}/{path}", json=body)
                assert response.status_code in (201, 202), response.text
                out[name] = round(time.perf_counter() - start, 2)
                if response.status_code == 202:  # the recompute is the job's
                    out["link_answer_s"] = out[name]
                    out[name] = _job_seconds(client, response.headers["Location"])

            timed("concepts_with_texts_s", "concepts", {"concepts": [
                {"name": t, "text": x} for t, x in zip(titles, corpus.texts, strict=True)]})
            timed("links_s", "links", {"links": [
                {"source": titles[u], "target": titles[v]} for u, v in corpus.links.tolist()]})
            timed("pairs_computed_s", "pairs", {"pairs": [
                {"a": titles[a], "b": titles[b]} for a, b in corpus.order.pool.tolist()]})
            a, b = corpus.order.pool[0].tolist()
            timed("recompute_on_a_link_s", "links", {"links": [
                {"source": titles[a], "target": titles[b]}]})
    return out


def _job_seconds(client: Any, location: str) -> float:
    """Follow the job at ``location`` until it succeeds; its duration, start to end."""
    while True:
        job = client.get(location).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.1)
    assert job["state"] == "succeeded", job
    started, finished = (datetime.fromisoformat(job[k]) for k in ("started_at", "finished_at"))
    return round((finished - started).total_seconds(), 2)


def _summary(signal: list[dict], timing: dict | None, argv: Sequence[str],
             service: dict | None = None) -> str:
    lines = ["# Computed pair features", "",
             f"`python -m benchmarks.features {shlex.join(argv)}`", ""]
    if signal:
        lines += ["| features | repeats | mean AUC | min | max |", "|---|---|---|---|---|"]
        for kind in ("computed", "noise"):
            auc = np.array([r["auc"] for r in signal if r["features"] == kind])
            lines.append(f"| {kind} | {len(auc)} | {auc.mean():.3f} | {auc.min():.3f} | "
                         f"{auc.max():.3f} |")
        lines.append("")
    if timing:
        lines += ["| concepts | words per text | pool | corpus statistics | pair features |",
                  "|---|---|---|---|---|",
                  f"| {timing['concepts']} | {timing['words']} | {timing['pool']} | "
                  f"{timing['corpus_statistics_s']} s | {timing['pair_features_s']} s |", ""]
    if service:
        lines += ["| through the API | seconds |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in service.items()]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.features",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--pool", type=int, default=3000)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--forest-trees", type=int, default=FOREST_TREES)
    parser.add_argument("--time-n", type=int, default=2000)
    parser.add_argument("--time-words", type=int, default=2000)
    parser.add_argument("--time-pool", type=int, default=20_000)
    parser.add_argument("--skip-signal", action="store_true")
    parser.add_argument("--skip-time", action="store_true")
    parser.add_argument("--service", action="store_true",
                        help="also time the API on the --time-* corpus")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with threadpool_limits(1):
        signal = [] if args.skip_signal else measure_signal(
            n=args.n, pool=args.pool, words=args.words, repeats=args.repeats,
            queries=args.queries, forest_trees=args.forest_trees, seed=args.seed)
        timing = None if args.skip_time else measure_time(
            n=args.time_n, words=args.time_words, pool=args.time_pool, seed=args.seed)
        service = None if not args.service else measure_service(
            n=args.time_n, words=args.time_words, pool=args.time_pool, seed=args.seed)
    if signal:
        write_csv(out / "signal.csv", signal, ("features", "repeat", "labeled", "auc"))
    if timing:
        write_csv(out / "time.csv", [timing], tuple(timing))
    if service:
        write_csv(out / "service.csv", [service], tuple(service))
    text = _summary(signal, timing, argv, service)
    (out / "summary.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
