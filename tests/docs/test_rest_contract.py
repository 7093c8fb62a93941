"""docs/api.md against the service: every route documented, every documented route real.

The "Routes" table holds one row per operation of ``create_app().openapi()`` (method, path),
and nothing else; each row names every query, path and header parameter of its operation and
every field of its JSON body. The "Outside the schema" table holds the routes and mounts that
answer but stay out of the schema (``/openapi.json``, ``/docs``, ``/redoc``, ``/ui``, the
static files; a mount is written ``PATH/{file}``), checked against ``app.routes`` both ways too.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Mount, Route

from app.main import create_app

__all__: list[str] = []

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
ROUTES = "## Routes"
OUTSIDE = "### Outside the schema"
METHODS = {"get", "post", "put", "patch", "delete"}


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is a pipe inside a cell)."""
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [cell.strip() for cell in cells[1:-1]]


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level."""
    assert heading in text, f"{PAGE.name} has no {heading!r} section"
    body = text.split(heading + "\n", 1)[1]
    return re.split(r"^#{1,6} ", body, maxsplit=1, flags=re.MULTILINE)[0]


def table_rows(text: str, heading: str) -> dict[tuple[str, str], list[str]]:
    """``(METHOD, path)`` → the row's cells, for each row of the section's table."""
    rows: dict[tuple[str, str], list[str]] = {}
    for line in _section(text, heading).splitlines():
        if not line.startswith("| `"):
            continue
        cells = _cells(line)
        key = (cells[0].strip("`"), cells[1].strip("`"))
        assert key not in rows, f"{key} is documented twice"
        rows[key] = cells
    return rows


@cache
def _openapi() -> dict[str, Any]:
    return create_app().openapi()


def operations() -> dict[tuple[str, str], dict[str, Any]]:
    """``(METHOD, path)`` → its operation, for every operation of the schema."""
    return {(method.upper(), path): op for path, item in _openapi()["paths"].items()
            for method, op in item.items() if method in METHODS}


def body_fields(op: dict[str, Any]) -> list[str]:
    """The fields of an operation's JSON body (none for a file or no body)."""
    content = op.get("requestBody", {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref")
    if ref is None:
        return []
    schema = _openapi()["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return list(schema.get("properties", {}))


def unlisted_routes() -> set[tuple[str, str]]:
    """The routes and mounts of the app that are not operations of its schema."""
    found: set[tuple[str, str]] = set()
    for route in create_app().routes:
        if isinstance(route, Mount):
            found.add(("GET", f"{route.path}/{{file}}"))
        elif isinstance(route, Route) and not route.include_in_schema:
            found.update((method, route.path) for method in route.methods or ()
                         if method != "HEAD")
    return found


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_every_route_of_the_schema_is_documented() -> None:
    missing = set(operations()) - set(table_rows(page(), ROUTES))
    assert not missing, f"routes of /openapi.json that docs/api.md lacks: {sorted(missing)}"


def test_every_documented_route_exists() -> None:
    extra = set(table_rows(page(), ROUTES)) - set(operations())
    assert not extra, f"rows of docs/api.md that are no route of /openapi.json: {sorted(extra)}"


@pytest.mark.parametrize("key", sorted(operations()), ids=" ".join)
def test_each_row_names_every_parameter_and_body_field(key: tuple[str, str]) -> None:
    row = table_rows(page(), ROUTES).get(key)
    if row is None:
        pytest.skip("not documented: the test above fails")
    params = row[2]
    op = operations()[key]
    names = [p["name"] for p in op.get("parameters", [])]
    unnamed = [name for name in names if f"`{name}`" not in params]
    assert not unnamed, f"{key}: its row does not name {unnamed}"
    fields = [f for f in body_fields(op) if f'"{f}"' not in params]
    assert not fields, f"{key}: its row does not name the body fields {fields}"


def test_the_routes_outside_the_schema_are_documented_both_ways() -> None:
    documented = set(table_rows(page(), OUTSIDE))
    actual = unlisted_routes()
    assert documented == actual, (f"undocumented: {sorted(actual - documented)}; "
                                  f"no such route: {sorted(documented - actual)}")


def test_the_parser_reads_a_table_and_would_see_a_missing_row() -> None:
    text = ("## Routes\n\n| Method | Path | Parameters | Does |\n|---|---|---|---|\n"
            "| `GET` | `/health` | — | up |\n\n| `GET` | `/x` | query `a\\|b` | x |\n"
            "## Next\n| `GET` | `/not-this` | | |\n")
    rows = table_rows(text, ROUTES)
    assert set(rows) == {("GET", "/health"), ("GET", "/x")}
    assert rows[("GET", "/x")][2] == "query `a\\|b`"
    assert ("GET", "/health") in operations() and len(operations()) > len(rows)
