"""Every keyset cursor is read back safely: a cursor the service did not give is a 422
``invalid-cursor`` problem on every paging route, on SQLite and PostgreSQL alike, never a 500
(an id beyond the column, brackets nested thousands deep, a shape or spelling of its own)."""

from __future__ import annotations

import base64

import pytest
from fastapi.testclient import TestClient

from app.errors import InvalidCursor
from app.security import MAX_ID
from app.services.cursors import ANSWERS, DISAGREEMENTS, LABELS, MAX_CURSOR_LENGTH, CursorShape
from tests.api.conftest import assert_problem, label, new_project

ROUTES = {"answers": ("cursor", ANSWERS), "labels": ("after", LABELS),
          "disagreements": ("cursor", DISAGREEMENTS)}
"""Every keyset route of a project: its cursor parameter and the shape of its cursors."""


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def _crafted(shape: CursorShape) -> dict[str, str]:
    """Cursors that the service never gives, by what is wrong with them."""
    issued = shape.encode(*[1 if kind is int else "a" for kind in shape.fields])
    text = base64.urlsafe_b64decode(issued + "=" * (-len(issued) % 4)).decode("utf-8")
    other = (CursorShape((int, str, str)) if shape.names else CursorShape((int,), ("after",)))
    return {
        "overflow": _b64(text.replace("1", "100000000000000000000", 1)),
        "beyond-32-bit": _b64(text.replace("1", str(MAX_ID + 1), 1)),
        "zero": _b64(text.replace("1", "0", 1)),
        "negative": _b64(text.replace("1", "-1", 1)),
        "bool": _b64(text.replace("1", "true", 1)),
        "float": _b64(text.replace("1", "1.0", 1)),
        "exponent": _b64(text.replace("1", "1e999", 1)),
        "huge-literal": _b64(text.replace("1", "9" * 2000, 1)),
        "deep-arrays": _b64("[" * 3000),
        "deep-objects": _b64('{"a":' * 600),
        "nested": _b64(text.replace("1", "[1]", 1)),
        "spaced": _b64(text.replace(",", ", ").replace(":", ": ")),
        "padded": issued + "=" * (-len(issued) % 4 or 4),
        "not-base64": "!!" + issued,
        "truncated": issued[:-2],
        "other-shape": other.encode(*[1 if kind is int else "a" for kind in other.fields]),
        "extra": _b64(text[:-1] + (',"x":2}' if shape.names else ',"x"]')),
        "empty": "",
        "not-json": _b64("after=1"),
        "not-utf-8": base64.urlsafe_b64encode(b"\xff\xfe[1]").decode("ascii"),
    }


CASES = [(route, why, cursor) for route, (_, shape) in ROUTES.items()
         for why, cursor in _crafted(shape).items()]


@pytest.mark.parametrize(("route", "why", "cursor"), CASES,
                         ids=[f"{route}-{why}" for route, why, _ in CASES])
def test_a_cursor_the_service_did_not_give_is_a_422(client: TestClient, route: str, why: str,
                                                    cursor: str) -> None:
    pid = new_project(client, ["a", "b"])
    assert label(client, pid, "a", "b").status_code == 201
    parameter, shape = ROUTES[route]
    assert len(cursor) <= MAX_CURSOR_LENGTH  # each reaches the decoder past the route's bound
    assert_problem(client.get(f"/projects/{pid}/{route}", params={parameter: cursor}), 422,
                   "invalid-cursor")
    with pytest.raises(InvalidCursor):
        shape.decode(cursor)


# (the disagreements' largest id: tests/api/test_disagreement_pages.py)
@pytest.mark.parametrize("route", ["answers", "labels"])
def test_the_largest_id_is_a_cursor_of_the_route(client: TestClient, route: str) -> None:
    """``MAX_ID`` fits every id column (a 32-bit integer on PostgreSQL): answers (oldest first)
    have none after it, labels (newest first) have them all."""
    pid = new_project(client, ["a", "b", "c"])
    assert label(client, pid, "a", "b").status_code == 201
    assert label(client, pid, "b", "c").status_code == 201
    parameter, shape = ROUTES[route]
    values = [MAX_ID if kind is int else "zzz" for kind in shape.fields]
    response = client.get(f"/projects/{pid}/{route}", params={parameter: shape.encode(*values)})
    assert response.status_code == 200, response.text
    everything = client.get(f"/projects/{pid}/{route}").json()["items"]
    assert len(everything) >= 2
    assert response.json()["items"] == ([] if route == "answers" else everything)


NAMES = ['[x', '{y', 'q"uote', "back\\slash", "é ü", "]}", "a,b:c"]


def test_names_with_brackets_quotes_and_escapes_page_through_every_label(
        client: TestClient) -> None:
    """The flatness check reads past JSON strings: the cursors of such names are accepted."""
    pid = new_project(client, NAMES)
    for a, b in zip(NAMES, NAMES[1:], strict=False):  # a chain: many inferred pairs
        assert label(client, pid, a, b).status_code == 201
    everything = client.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
    paged, after = [], None
    while True:
        params = {"limit": 2} | ({} if after is None else {"after": after})
        page = client.get(f"/projects/{pid}/labels", params=params)
        assert page.status_code == 200, page.text
        paged += page.json()["items"]
        after = page.json()["next"]
        if after is None:
            break
        assert LABELS.decode(after)[1:] == (paged[-1]["a"], paged[-1]["b"])
    assert paged == everything and len(everything) == len(NAMES) * (len(NAMES) - 1)


def test_a_cursor_longer_than_the_bound_is_refused_before_it_is_read() -> None:
    name = "n" * MAX_CURSOR_LENGTH
    cursor = LABELS.encode(1, name, name)
    assert len(cursor) > MAX_CURSOR_LENGTH
    with pytest.raises(InvalidCursor):
        LABELS.decode(cursor)
    short = LABELS.encode(1, "n", "n")
    assert LABELS.decode(short) == (1, "n", "n")
