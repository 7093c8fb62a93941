"""Bounded input of POST /projects/{pid}/import: line length, nesting, spool total, CSV lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from app.services.importing import bounded_lines, too_deep
from tests.api.conftest import assert_problem, new_project

JSONL = {"Content-Type": "application/jsonl"}
CSV = {"Content-Type": "text/csv"}


def labels_of(client: TestClient, pid: int) -> list[Any]:
    return client.get(f"/projects/{pid}/labels").json()["items"]


def test_a_line_over_the_cap_is_refused_naming_it_and_the_next_lines_keep_their_numbers(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_import_line_bytes=1000)
    pid = new_project(client)
    body = b"\n".join([
        json.dumps({"kind": "concept", "name": "x"}).encode(),                          # 1
        json.dumps({"kind": "concept", "name": "y", "description": "d" * 5000}).encode(),  # 2
        json.dumps({"kind": "concept", "name": "z", "colour": 1}).encode(),             # 3
    ])
    problem = assert_problem(client.post(f"/projects/{pid}/import", content=body,
                                         headers=JSONL), 422, "invalid-items")
    assert [e["line"] for e in problem["errors"]] == [2, 3]
    assert "longer than 1000 bytes" in problem["errors"][0]["reason"]
    assert client.get(f"/projects/{pid}/concepts").json()["total"] == 0


def test_a_line_nested_100000_deep_is_a_422_naming_it_and_the_connection_stays_usable(
        client: TestClient) -> None:
    pid = new_project(client)
    body = (json.dumps({"kind": "concept", "name": "x"}) + "\n" + "[" * 100_000 + "\n"
            + '{"kind": "concept", "name": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['
              '[[[[[[[[[[[[[[[[[[[["}\n').encode()
    problem = assert_problem(client.post(f"/projects/{pid}/import", content=body,
                                         headers=JSONL), 422, "invalid-items")
    assert [e["line"] for e in problem["errors"]] == [2]  # brackets in a string do not count
    assert "nested deeper than 64" in problem["errors"][0]["reason"]
    assert client.get("/health").status_code == 200


def test_the_depth_scan_ignores_brackets_inside_strings() -> None:
    assert not too_deep(b'{"a": "' + b"[" * 500 + b'"}', 3)
    assert not too_deep(b'{"a": "\\"' + b"[" * 500 + b'"}', 3)
    assert too_deep(b'{"a": [[[1]]]}', 3)
    assert not too_deep(b'{"a": [[1]]}', 3)


def test_bounded_lines_never_return_more_than_the_cap(tmp_path: Any) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"ab\n" + b"x" * 10_000 + b"\ncd\n" + b"y" * 5)
    with path.open("rb") as handle:
        assert list(bounded_lines(handle, 100)) == [b"ab\n", None, b"cd\n", b"yyyyy"]


def test_invalid_utf8_on_csv_line_2_names_line_2(client: TestClient) -> None:
    pid = new_project(client)
    body = b"name,description\nlimit\xff\xfe,x\nderivative,y\n"
    problem = assert_problem(client.post(f"/projects/{pid}/import", content=body,
                                         headers=CSV), 422, "invalid-items")
    assert [e["line"] for e in problem["errors"]] == [2]
    assert "not UTF-8" in problem["errors"][0]["reason"]


def test_a_long_csv_line_is_named(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_import_line_bytes=100)
    pid = new_project(client)
    body = b"name,description\nlimit,x\nderivative," + b"y" * 200 + b"\n"
    problem = assert_problem(client.post(f"/projects/{pid}/import", content=body,
                                         headers=CSV), 422, "invalid-items")
    assert [e["line"] for e in problem["errors"]] == [3]


def test_imports_past_the_spool_total_are_a_503_with_retry_after_and_give_it_back(
        make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_import_spool_bytes=2000)
    pid = new_project(client)
    big = "".join(json.dumps({"kind": "concept", "name": f"c{i}"}) + "\n"
                  for i in range(200)).encode()
    response = client.post(f"/projects/{pid}/import", content=big, headers=JSONL)
    assert_problem(response, 503, "imports-busy")
    assert response.headers["Retry-After"]
    small = b'{"kind": "concept", "name": "x"}\n'
    for _ in range(3):  # the refused import's bytes were given back, and so are these
        response = client.post(f"/projects/{pid}/import", content=small, headers=JSONL)
        assert response.status_code == 200, response.text
    assert client.app.state.import_spool.used == 0  # type: ignore[attr-defined]
