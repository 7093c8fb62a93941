"""Questions (``next``), leases, the concept map (``predictions``) and the exports."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import networkx as nx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from models import Reservation, Suggestion, utcnow
from reasoning.strategies import ALL_STRATEGIES, STRATEGY_NAMES
from tests.api.conftest import assert_problem, label, new_project

N = 8
NAMES = [f"c{i}" for i in range(N)]


def _chain_project(client: TestClient, **fields: object) -> int:
    """A pool of every ordered pair of a chain c0 ≺ c1 ≺ …, features that reveal the truth."""
    rng = np.random.default_rng(0)
    pairs = []
    for i in range(N):
        for j in range(N):
            if i != j:
                truth = float(i < j)
                pairs.append((NAMES[i], NAMES[j], [truth + rng.normal(0, 0.3),
                                                   float(j - i) + rng.normal(0, 0.3)]))
    return new_project(client, NAMES, pairs, **fields)


def _undecided(client: TestClient, pid: int) -> set[tuple[str, str]]:
    items = client.get(f"/projects/{pid}/pairs", params={"limit": 10_000}).json()["items"]
    return {(p["a"], p["b"]) for p in items if p["status"] == "undecided"}


def _db(client: TestClient):  # the app's session factory, to look behind the API
    return client.app.state.database.sessions  # type: ignore[attr-defined]


def test_next_suggests_an_undecided_pool_pair_with_gains(client: TestClient) -> None:
    pid = _chain_project(client)
    body = client.get(f"/projects/{pid}/next").json()
    assert body["strategy"] == "EDP-F" and body["undecided"] == N * (N - 1)  # the default
    assert body["model"] is None  # no label yet: p = 0.5
    [query] = body["queries"]
    assert (query["a"], query["b"]) in _undecided(client, pid)
    assert query["gain_if_positive"] >= 1 and query["gain_if_negative"] >= 1
    assert query["score"] == (query["gain_if_positive"] + query["gain_if_negative"]) / 2
    named = client.get(f"/projects/{pid}/next", params={"strategy": "default"}).json()
    assert named["strategy"] == "EDP-F" and named["queries"] == body["queries"]


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
def test_every_strategy_only_suggests_undecided_pool_pairs(client: TestClient,
                                                           strategy: str) -> None:
    pid = _chain_project(client)
    label(client, pid, "c0", "c3")
    label(client, pid, "c5", "c2", "negative")
    body = client.get(f"/projects/{pid}/next", params={"strategy": strategy, "k": 3}).json()
    assert body["strategy"] == strategy
    suggested = {(q["a"], q["b"]) for q in body["queries"]}
    assert len(suggested) == 3 and suggested <= _undecided(client, pid)
    assert body["undecided"] == len(_undecided(client, pid))


def test_strategy_names_are_read_leniently(client: TestClient) -> None:
    pid = _chain_project(client)
    for text, name in [("lc-r+", "LC-R+"), ("LC-Rplus", "LC-R+"), ("qbc-r plus", "QBC-R+"),
                       ("cnt", "CNT"), ("random-r", "Random-R")]:
        assert client.get(f"/projects/{pid}/next",
                          params={"strategy": text}).json()["strategy"] == name
    # A bare '+' in a query string is a space.
    assert client.get(f"/projects/{pid}/next?strategy=LC-R+").json()["strategy"] == "LC-R+"
    assert client.get(f"/projects/{pid}/next?strategy=LC-R%2B").json()["strategy"] == "LC-R+"
    problem = assert_problem(client.get(f"/projects/{pid}/next", params={"strategy": "best"}),
                             422, "unknown-strategy")
    assert "LC-R+" in problem["detail"]
    for params in [{"k": 0}, {"k": 101}, {"k": "two"}, {"annotator": ""}]:
        assert_problem(client.get(f"/projects/{pid}/next", params=params), 422,
                       "validation-error")


def test_the_model_appears_once_both_classes_are_labeled(client: TestClient) -> None:
    pid = _chain_project(client)
    lc = {"strategy": "LC", "fresh": True}  # trained on the asserted pool pairs only
    label(client, pid, "c0", "c1")
    assert client.get(f"/projects/{pid}/next", params=lc).json()["model"] is None  # one class
    label(client, pid, "c4", "c6", "negative")
    model = client.get(f"/projects/{pid}/next", params=lc).json()["model"]
    assert model["name"] == "logistic_regression" and model["labels_behind"] == 0
    assert (model["positive"], model["negative"], model["trained_on"]) == (1, 1, 2)
    # LC-R+ trains on every decided pool pair: the inferred (c1, c0) too.
    model = client.get(f"/projects/{pid}/next", params={"fresh": True}).json()["model"]
    assert (model["positive"], model["negative"]) == (1, 2)


def _models(client: TestClient, pid: int) -> dict:
    return client.app.state.trainer.models(pid)  # type: ignore[attr-defined]


def test_the_model_is_retrained_only_when_the_labels_changed(client: TestClient) -> None:
    pid = _chain_project(client)
    label(client, pid, "c0", "c1")
    label(client, pid, "c4", "c6", "negative")
    info = client.get(f"/projects/{pid}/next", params={"fresh": True}).json()["model"]
    (key, model), = _models(client, pid).items()
    assert client.get(f"/projects/{pid}/next", params={"fresh": True}).json()["model"] == info
    assert _models(client, pid)[key] is model
    label(client, pid, "c2", "c3")
    again = client.get(f"/projects/{pid}/next", params={"fresh": True}).json()["model"]
    assert _models(client, pid)[key] is not model
    assert again["version"] > info["version"] and again["labels_behind"] == 0


def test_a_new_concept_or_name_does_not_retrain(client: TestClient) -> None:
    pid = _chain_project(client)
    label(client, pid, "c0", "c1")
    label(client, pid, "c4", "c6", "negative")
    fresh = {"fresh": True}
    first = client.get(f"/projects/{pid}/next", params=fresh).json()["model"]
    predictions = client.get(f"/projects/{pid}/predictions", params=fresh).json()
    models = _models(client, pid)
    assert len(models) == 2  # the strategy's model and the prediction model
    client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "newcomer"}]})
    client.patch(f"/projects/{pid}", json={"name": "renamed"})
    assert client.get(f"/projects/{pid}/next", params=fresh).json()["model"] == first
    assert client.get(f"/projects/{pid}/predictions", params=fresh).json() == predictions
    assert all(_models(client, pid)[k] is m for k, m in models.items())
    # A new pool pair is new data: both models are trained again.
    client.post(f"/projects/{pid}/pairs",
                json={"pairs": [{"a": "newcomer", "b": "c0", "features": [0.0, 0.0]}]})
    client.get(f"/projects/{pid}/next", params=fresh)
    client.get(f"/projects/{pid}/predictions", params=fresh)
    assert all(_models(client, pid)[k] is not m for k, m in models.items())


def test_an_exhausted_pool_gives_an_empty_list(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"], [("a", "b", [1.0]), ("b", "a", [0.0])])
    label(client, pid, "a", "b")
    body = client.get(f"/projects/{pid}/next").json()
    assert body["queries"] == [] and body["undecided"] == 0 and body["reserved_until"] is None


def test_suggestions_are_logged(client: TestClient) -> None:
    pid = _chain_project(client)
    client.get(f"/projects/{pid}/next", params={"k": 2, "annotator": "ann"})
    with _db(client)() as session:
        rows = session.scalars(select(Suggestion).where(Suggestion.project_id == pid)).all()
    assert len(rows) == 2 and {r.annotator for r in rows} == {"ann"}
    assert all(r.strategy == "EDP-F" for r in rows)  # the default, by its own name


@pytest.mark.parametrize("prediction_model", ["random_forest", "logistic_regression"])
def test_huge_finite_features_never_break_a_model(client: TestClient,
                                                  prediction_model: str) -> None:
    # Accepted as any finite float, but beyond float32 for the trees, and squared by the scaler.
    rng = np.random.default_rng(1)
    extremes = [1.7e308, -1.7e308, 1e200, 3.4e38, 5e-324, 0.0]
    pairs = [(NAMES[i], NAMES[j], [float(rng.choice(extremes)), float(j - i)])
             for i in range(N) for j in range(N) if i != j]
    pid = new_project(client, NAMES, pairs, prediction_model=prediction_model)
    for a, b in [("c0", "c1"), ("c1", "c2"), ("c4", "c6")]:
        label(client, pid, a, b)
    for a, b in [("c6", "c5"), ("c3", "c0")]:
        label(client, pid, a, b, "negative")
    for strategy in STRATEGY_NAMES:
        body = client.get(f"/projects/{pid}/next",
                          params={"strategy": strategy, "k": 3, "fresh": True})
        assert body.status_code == 200, (strategy, body.text)
        assert body.json()["queries"]
    predictions = client.get(f"/projects/{pid}/predictions",
                             params={"limit": 10_000, "fresh": True})
    assert predictions.status_code == 200, predictions.text
    assert predictions.json()["model"]["name"] == prediction_model
    predicted = [i for i in predictions.json()["items"] if i["source"] == "predicted"]
    assert predicted and all(0 <= i["probability"] <= 1 for i in predicted)
    status = client.get(f"/projects/{pid}/pairs/status",
                        params={"a": "c7", "b": "c0", "fresh": True})
    assert status.status_code == 200 and 0 <= status.json()["prediction"] <= 1
    # The stored features are still exactly what was sent.
    stored = client.get(f"/projects/{pid}/pairs", params={"limit": 10_000}).json()["items"]
    assert [p["features"] for p in stored] == [f for _, _, f in pairs]


def test_the_graphml_export_carries_any_accepted_name(client: TestClient) -> None:
    names = ["a/b", 'say "hi"', "<&>", "日本語", "emoji 🙂", "line\u2028sep", "\ufdd0",
             "\U0010fffd", "\ufffd"]
    pid = new_project(client, names)
    for a, b in zip(names, names[1:], strict=False):
        label(client, pid, a, b)
    response = client.get(f"/projects/{pid}/export", params={"format": "graphml"})
    graph = nx.read_graphml(io.BytesIO(response.content))
    assert set(graph.nodes) == set(names)
    assert graph.number_of_edges() == len(names) * (len(names) - 1) // 2


def test_the_suggestion_log_is_listed_newest_first(client: TestClient) -> None:
    pid = _chain_project(client)
    first = client.get(f"/projects/{pid}/next", params={"annotator": "ann"}).json()["queries"]
    label(client, pid, first[0]["a"], first[0]["b"],
          "positive" if first[0]["a"] < first[0]["b"] else "negative")
    second = client.get(f"/projects/{pid}/next", params={"k": 2, "strategy": "cnt"}).json()
    body = client.get(f"/projects/{pid}/suggestions").json()
    assert body["total"] == 3
    items = body["items"]
    assert [(i["a"], i["b"]) for i in items[2:]] == [(first[0]["a"], first[0]["b"])]
    assert {(i["a"], i["b"]) for i in items[:2]} == {(q["a"], q["b"])
                                                      for q in second["queries"]}
    assert [i["strategy"] for i in items] == ["CNT", "CNT", "EDP-F"]
    assert [i["annotator"] for i in items] == [None, None, "ann"]
    assert items[2]["score"] == first[0]["score"]
    assert items[2]["gain_if_positive"] == first[0]["gain_if_positive"]
    assert items[0]["version"] > items[2]["version"]
    assert items[0]["id"] > items[1]["id"] > items[2]["id"]
    mine = client.get(f"/projects/{pid}/suggestions", params={"annotator": "ann"}).json()
    assert mine["total"] == 1 and mine["items"][0]["annotator"] == "ann"
    page = client.get(f"/projects/{pid}/suggestions", params={"limit": 1, "offset": 2}).json()
    assert page["total"] == 3 and page["items"] == items[2:]
    assert_problem(client.get("/projects/999/suggestions"), 404, "project-not-found")
    assert_problem(client.get(f"/projects/{pid}/suggestions", params={"limit": 10_001}), 422,
                   "validation-error")


def test_leased_pairs_are_not_handed_to_another_annotator(client: TestClient) -> None:
    # Two unrelated pool pairs: an answer to one never decides the other.
    pid = new_project(client, ["a", "b", "c", "d"], [("a", "b", [1.0]), ("c", "d", [0.0])])

    def ask(who: str | None) -> set[tuple[str, str]]:
        params = {"k": 2} | ({"annotator": who} if who else {})
        body = client.get(f"/projects/{pid}/next", params=params).json()
        assert body["undecided"] == len(_undecided(client, pid))
        return {(q["a"], q["b"]) for q in body["queries"]}

    first = client.get(f"/projects/{pid}/next", params={"annotator": "ann"}).json()
    assert first["reserved_until"] is not None
    held = {(q["a"], q["b"]) for q in first["queries"]}
    other = ask("bob")
    assert len(held) == len(other) == 1 and held.isdisjoint(other)
    assert ask("carol") == set() and ask(None) == set()  # everything is leased
    # A label releases its pair (and decides it).
    (a, b), = held
    assert label(client, pid, a, b).status_code == 201
    with _db(client)() as session:
        assert session.scalar(select(func.count()).select_from(Reservation)
                              .where(Reservation.annotator == "ann")) == 0
    # The lease's end releases the rest.
    assert ask("carol") == set()
    with _db(client).begin() as session:
        session.execute(update(Reservation).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert ask("carol") == other


def test_an_annotators_new_request_replaces_their_leases(client: TestClient) -> None:
    pid = _chain_project(client)
    first = client.get(f"/projects/{pid}/next", params={"annotator": "ann"}).json()
    again = client.get(f"/projects/{pid}/next", params={"annotator": "ann"}).json()
    assert again["queries"] == first["queries"]  # not hidden from its own holder
    with _db(client)() as session:
        assert session.scalar(select(func.count()).select_from(Reservation)) == 1


def test_predictions_cover_every_pool_pair(client: TestClient) -> None:
    pid = _chain_project(client)
    body = client.get(f"/projects/{pid}/predictions", params={"limit": 10_000}).json()
    assert body["model"] is None and body["total"] == N * (N - 1)
    assert all(i["source"] == "predicted" and i["probability"] is None for i in body["items"])
    label(client, pid, "c0", "c4")
    label(client, pid, "c4", "c7")
    label(client, pid, "c6", "c1", "negative")
    body = client.get(f"/projects/{pid}/predictions",
                      params={"limit": 10_000, "fresh": True}).json()
    model = body["model"]
    assert model["name"] == "random_forest" and model["positive"] >= 3
    items = {(i["a"], i["b"]): i for i in body["items"]}
    assert items[("c0", "c4")] == {"a": "c0", "b": "c4", "label": "positive",
                                   "source": "asserted", "probability": 1.0}
    assert items[("c0", "c7")]["source"] == "inferred"
    predicted = [i for i in items.values() if i["source"] == "predicted"]
    assert predicted and all(0.0 <= i["probability"] <= 1.0 for i in predicted)
    high = client.get(f"/projects/{pid}/predictions",
                      params={"min_probability": 0.5, "limit": 10_000}).json()
    assert high["total"] == sum(1 for i in items.values() if i["probability"] >= 0.5)
    assert all(i["probability"] >= 0.5 for i in high["items"])
    for params in [{"min_probability": 1.5}, {"min_probability": "nan"}, {"limit": 10_001}]:
        assert_problem(client.get(f"/projects/{pid}/predictions", params=params), 422,
                       "validation-error")


def test_status_of_an_undecided_pool_pair_carries_the_prediction(client: TestClient) -> None:
    pid = _chain_project(client)
    label(client, pid, "c0", "c4")
    label(client, pid, "c6", "c1", "negative")
    body = client.get(f"/projects/{pid}/pairs/status",
                      params={"a": "c2", "b": "c3", "fresh": True}).json()
    assert body["status"] == "undecided" and 0.0 <= body["prediction"] <= 1.0
    assert body["model"]["name"] == "random_forest" and body["model"]["labels_behind"] == 0


def test_the_prediction_model_is_a_project_setting(client: TestClient) -> None:
    pid = _chain_project(client, prediction_model="logistic_regression")
    label(client, pid, "c0", "c4")
    label(client, pid, "c6", "c1", "negative")
    fresh = {"fresh": True}
    body = client.get(f"/projects/{pid}/predictions", params=fresh).json()
    assert body["model"]["name"] == "logistic_regression"
    client.patch(f"/projects/{pid}", json={"prediction_model": "random_forest"})
    body = client.get(f"/projects/{pid}/predictions", params=fresh).json()
    assert body["model"]["name"] == "random_forest"


def test_exports_hold_every_decided_pair(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c", "x y"])
    label(client, pid, "a", "b")
    label(client, pid, "b", "c")
    label(client, pid, "c", "x y", "negative")
    listed = client.get(f"/projects/{pid}/labels", params={"limit": 10_000}).json()["items"]
    truth = {(i["a"], i["b"], i["label"], i["source"]) for i in listed}

    response = client.get(f"/projects/{pid}/export", params={"format": "csv"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    lines = response.text.strip().splitlines()
    assert lines[0] == "a,b,label,source,id,caused_by,annotator,confidence,contested"
    import csv
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert {(r["a"], r["b"], r["label"], r["source"]) for r in rows} == truth

    response = client.get(f"/projects/{pid}/export", params={"format": "json"})
    body = json.loads(response.content)
    assert body["project"]["id"] == pid
    assert {(i["a"], i["b"], i["label"], i["source"]) for i in body["items"]} == truth

    response = client.get(f"/projects/{pid}/export", params={"format": "graphml"})
    graph = nx.read_graphml(io.BytesIO(response.content))
    assert set(graph.nodes) == {"a", "b", "c", "x y"}
    assert set(graph.edges) == {(a, b) for a, b, v, _ in truth if v == "positive"}
    assert graph.edges["a", "b"]["asserted"] is True
    assert graph.edges["a", "c"]["asserted"] is False
    assert graph.edges["a", "c"]["confidence"] == 1.0  # strict: no answer contradicts it
    assert graph.edges["a", "c"]["contested"] is False
    assert {r["confidence"] for r in rows} == {"1.0"} and {r["contested"] for r in rows} == {
        "false"}
    assert_problem(client.get(f"/projects/{pid}/export", params={"format": "xlsx"}), 422,
                   "validation-error")


def test_consistent_predictions_are_a_strict_order_over_the_decided_pairs(
        client: TestClient) -> None:
    pid = _chain_project(client)
    label(client, pid, "c0", "c4")
    label(client, pid, "c4", "c7")
    label(client, pid, "c6", "c1", "negative")
    params = {"limit": 10_000, "fresh": True}
    raw = client.get(f"/projects/{pid}/predictions", params={**params, "consistent": False})
    body = client.get(f"/projects/{pid}/predictions", params={**params, "consistent": True})
    assert raw.status_code == body.status_code == 200, body.text
    raw_items = {(i["a"], i["b"]): i for i in raw.json()["items"]}
    items = {(i["a"], i["b"]): i for i in body.json()["items"]}
    assert set(items) == set(raw_items) and body.json()["total"] == N * (N - 1)
    assert all(i["label"] is None for i in raw_items.values() if i["source"] == "predicted")
    for pair, item in items.items():
        assert item["source"] in ("asserted", "inferred", "predicted", "forced")
        assert item["label"] == ("positive" if item["probability"] >= 0.5 else "negative")
        if raw_items[pair]["source"] != "predicted":  # decided pairs are unchanged
            assert item == raw_items[pair]
    positive = {pair for pair, item in items.items() if item["label"] == "positive"}
    assert ("c0", "c7") in positive and ("c6", "c1") not in positive
    assert not any((b, a) in positive for a, b in positive)  # every pair of the chain is pooled
    assert all((a, c) in positive for a, b in positive for b2, c in positive
               if b == b2 and a != c)
    assert client.get(f"/projects/{pid}/predictions", params=params).json() == body.json()


def test_edp_f_trains_its_extra_trees_elsewhere_and_scores_with_them(client: TestClient) -> None:
    pid = _chain_project(client)
    label(client, pid, "c0", "c3")
    label(client, pid, "c5", "c2", "negative")
    params = {"strategy": "edp-f", "fresh": True, "k": 2}
    body = client.get(f"/projects/{pid}/next", params=params).json()
    assert body["strategy"] == "EDP-F"
    model = body["model"]
    assert model["name"] == "extra_trees" and model["labels_behind"] == 0
    # trained on every decided pool pair (the closure's too), like the other -R+ strategies
    assert model["trained_on"] == N * (N - 1) - body["undecided"]
    assert len(body["queries"]) == 2
    assert {(q["a"], q["b"]) for q in body["queries"]} <= _undecided(client, pid)


def test_the_strategy_parameter_is_documented_from_the_registry() -> None:
    from app.main import create_app
    from app.routes.queries import strategy_description
    from reasoning.strategies import STRATEGIES

    document = create_app().openapi()
    [parameter] = [p for p in document["paths"]["/projects/{project_id}/next"]["get"]
                   ["parameters"] if p["name"] == "strategy"]
    text = strategy_description()
    assert parameter["description"] == parameter["schema"]["description"] == text
    assert text.startswith(", ".join(ALL_STRATEGIES) + ", or ")
    for strategy in STRATEGIES:
        for alias in strategy.aliases:
            assert f"{alias} ({strategy.name}" in text
