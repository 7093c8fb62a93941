"""Bad input never makes a 500: size limits, malformed bodies, duplicate JSON keys, arbitrary
names."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import assert_problem, new_project


@pytest.fixture
def small(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(max_body_bytes=2_000)


def test_a_body_over_the_limit_is_413_before_parsing(small: TestClient) -> None:
    pid = new_project(small, ["a", "b"])
    big = {"pairs": [{"a": "a", "b": "b", "features": [0.123456789] * 200}]}
    problem = assert_problem(small.post(f"/projects/{pid}/pairs", json=big), 413,
                             "payload-too-large")
    assert "2000" in problem["detail"]
    # Not even JSON: refused on its declared size, never parsed.
    assert_problem(small.post(f"/projects/{pid}/pairs", content=b"x" * 5_000,
                              headers={"content-type": "application/json"}), 413,
                   "payload-too-large")
    assert small.get(f"/projects/{pid}/pairs").json()["total"] == 0


def test_a_streamed_body_over_the_limit_is_413(small: TestClient) -> None:
    pid = new_project(small, ["a", "b"])

    def chunks() -> Iterator[bytes]:  # no Content-Length: the bytes are counted
        yield b'{"concepts": ['
        for _ in range(200):
            yield b'{"name": "xxxxxxxxxxxxxxxx"},'
        yield b'{"name": "y"}]}'

    response = small.post(f"/projects/{pid}/concepts", content=chunks(),
                          headers={"content-type": "application/json"})
    assert_problem(response, 413, "payload-too-large")
    assert small.get(f"/projects/{pid}/concepts").json()["total"] == 2


def test_wrong_shapes_are_422(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    for body in [b"[]", b"null", b"1", b'"text"', b'{"concepts": {"name": "x"}}',
                 b'{"concepts": [["x"]]}', b'{"concepts": [{"name": {"x": 1}}]}',
                 b'{"concepts": [{"name": "x", "extra": null}]}']:
        response = client.post(f"/projects/{pid}/concepts", content=body,
                               headers={"content-type": "application/json"})
        assert_problem(response, 422, "validation-error")
    response = client.post(f"/projects/{pid}/concepts", content=b'{"concepts": []}',
                           headers={"content-type": "text/plain"})
    assert response.status_code == 422
    for raw in [b"\xa0\xfeP\xc3\x0c\xe9B", b"\xff\xfe\x00"]:  # not even text
        response = client.post(f"/projects/{pid}/labels", content=raw,
                               headers={"content-type": "application/json"})
        assert_problem(response, 422, "validation-error")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(max_size=600) | st.tuples(
    st.text(max_size=300), st.sampled_from("\ufffe\uffff"), st.text(max_size=300)).map("".join))
def test_any_name_is_stored_or_refused_never_a_500(client: TestClient, name: str) -> None:
    response = client.post("/projects", json={"name": name})
    valid = 1 <= len(name) <= 512 and not any(
        ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF
        or c in "\ufffe\uffff" for c in name)
    assert response.status_code == (201 if valid else 422), response.text
    if valid:
        assert client.get(f"/projects/{response.json()['id']}").json()["name"] == name


# --------------------------------------------------------------------------------------------
# Duplicate JSON keys
# --------------------------------------------------------------------------------------------


def _raw_post(client: TestClient, path: str, document: str) -> Any:
    return client.post(path, content=document.encode(),
                       headers={"content-type": "application/json"})


def test_a_duplicate_key_is_422_naming_the_key(client: TestClient) -> None:
    response = _raw_post(client, "/projects", '{"name": "first", "name": "second"}')
    problem = assert_problem(response, 422, "validation-error")
    assert "'name'" in problem["detail"]
    assert problem["errors"] == [{"loc": ["body"], "msg": "duplicate key 'name' in a JSON object",
                                  "type": "json_duplicate_key"}]
    assert client.get("/projects").json()["total"] == 0


def test_a_duplicate_key_deep_inside_a_body_is_422(client: TestClient) -> None:
    pid = new_project(client, ["a", "b", "c"])
    document = ('{"labels": [{"a": "a", "b": "b", "label": "positive"},'
                ' {"a": "b", "b": "c", "label": "positive", "label": "negative"}]}')
    problem = assert_problem(_raw_post(client, f"/projects/{pid}/labels/bulk", document), 422,
                             "validation-error")
    assert "'label'" in problem["detail"]
    listing = client.get(f"/projects/{pid}/labels", params={"source": "asserted"}).json()
    assert listing["total"] == 0
    # The same document without the duplicate is accepted.
    fixed = document.replace(', "label": "negative"', "")
    assert _raw_post(client, f"/projects/{pid}/labels/bulk", fixed).status_code == 201


def _api_routes(routes: list[Any]) -> list[APIRoute]:
    """Every API route, also those of included routers (FastAPI keeps them in the router)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        included = getattr(route, "original_router", None)
        if included is not None:
            found += _api_routes(included.routes)
    return found


def test_every_route_that_takes_a_body_refuses_duplicate_keys(client: TestClient) -> None:
    from app.routes.common import StrictJSONRoute

    with_body = [route for route in _api_routes(client.app.routes)  # type: ignore[attr-defined]
                 if route.body_field is not None]
    assert len(with_body) >= 6
    assert all(isinstance(route, StrictJSONRoute) for route in with_body), \
        [route.path for route in with_body if not isinstance(route, StrictJSONRoute)]


def test_a_bulk_body_is_checked_in_the_route_as_a_declared_one_would_be(
        client: TestClient) -> None:
    """The bulk body is validated in the route's worker thread, not in the event loop: the
    same 422 problems (naming where, under ``body``), and the same documented schema."""
    pid = new_project(client, ["a", "b", "c"])
    bad = {"labels": [{"a": "a", "b": "b", "label": "positive"},
                      {"a": "b", "b": "c", "label": "maybe"}]}
    problem = assert_problem(client.post(f"/projects/{pid}/labels/bulk", json=bad), 422,
                             "validation-error")
    assert [e["loc"] for e in problem["errors"]] == [["body", "labels", 1, "label"]]
    extra = {"labels": [{"a": "a", "b": "b", "label": "positive", "weight": 2}]}
    problem = assert_problem(client.post(f"/projects/{pid}/labels/bulk", json=extra), 422,
                             "validation-error")
    assert problem["errors"][0]["loc"] == ["body", "labels", 0, "weight"]
    assert_problem(client.post(f"/projects/{pid}/labels/bulk", json=[1]), 422,
                   "validation-error")
    assert client.get(f"/projects/{pid}/labels").json()["total"] == 0
    schema = client.get("/openapi.json").json()["paths"]["/projects/{project_id}/labels/bulk"][
        "post"]["requestBody"]["content"]["application/json"]["schema"]
    item = schema["properties"]["labels"]["items"]
    assert schema["required"] == ["labels"] and set(item["required"]) == {"a", "b", "label"}
    assert item["properties"]["label"]["enum"] == ["positive", "negative"]


LARGE_BODIES = [
    ("pairs", {"pairs": [{"a": "a", "b": "b"}, {"a": "b", "b": 7}]}, ["pairs", 1, "b"], "pairs"),
    ("concepts", {"concepts": [{"name": "d"}, {"name": ""}]}, ["concepts", 1, "name"],
     "concepts"),
    ("links", {"links": [{"source": "a", "target": "b"}, {"source": "a"}]},
     ["links", 1, "target"], "links"),
]


@pytest.mark.parametrize(("path", "bad", "where", "field"), LARGE_BODIES,
                         ids=[row[0] for row in LARGE_BODIES])
def test_every_large_body_is_checked_in_the_route_as_a_declared_one_would_be(
        client: TestClient, path: str, bad: dict[str, Any], where: list[Any],
        field: str) -> None:
    """Pool pairs, concepts and links, like the bulk labels, are validated in the route's
    worker thread: the same 422 problem naming where, nothing stored, the documented
    schema of the declared body."""
    pid = new_project(client, ["a", "b", "c"])
    problem = assert_problem(client.post(f"/projects/{pid}/{path}", json=bad), 422,
                             "validation-error")
    assert [e["loc"] for e in problem["errors"]] == [["body", *where]]
    assert_problem(client.post(f"/projects/{pid}/{path}", json=[1]), 422, "validation-error")
    assert client.get(f"/projects/{pid}/concepts").json()["total"] == 3
    assert client.get(f"/projects/{pid}/pairs").json()["total"] == 0
    schema = client.get("/openapi.json").json()["paths"][f"/projects/{{project_id}}/{path}"][
        "post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == [field] and schema["properties"][field]["type"] == "array"
