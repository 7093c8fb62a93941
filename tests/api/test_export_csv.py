"""The CSV export is safe to open in a spreadsheet (OWASP's CSV-injection rule)."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from app.services.export import neutralise_cell
from tests.api.conftest import label, new_project

FORMULAS = ['=HYPERLINK("x")', "+1", "-2", "@SUM(A1)"]
ORDINARY = ["limit", 'say "hi", twice', "a=b", "1-2"]


@pytest.mark.parametrize("cell", ["=1", "+1", "-1", "@x", "\tx", "\rx", "\t", "\r"])
def test_a_cell_starting_a_formula_gets_a_leading_quote(cell: str) -> None:
    assert neutralise_cell(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["limit", "a=b", " =1", "'=1", "", 7, -3])
def test_other_cells_are_kept_as_they_are(cell: object) -> None:
    assert neutralise_cell(cell) == cell


def test_csv_export_neutralises_formula_names_and_keeps_the_others(client: TestClient) -> None:
    pid = new_project(client, concepts=FORMULAS + ORDINARY)
    pairs = list(zip(FORMULAS, ORDINARY, strict=True))
    for a, b in pairs:
        assert label(client, pid, a, b, annotator="=cmd|' /C calc'!A0").status_code == 201
    assert label(client, pid, "limit", "a=b", "negative").status_code == 201

    response = client.get(f"/projects/{pid}/export", params={"format": "csv"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.text)))
    exported = {(row["a"], row["b"]): row for row in rows if row["source"] == "asserted"}
    assert set(exported) == {("'" + a, b) for a, b in pairs} | {("limit", "a=b")}
    for a, b in pairs:
        assert exported["'" + a, b]["annotator"] == "'=cmd|' /C calc'!A0"
    assert exported["limit", "a=b"]["annotator"] == ""
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), row
        assert int(row["id"] or row["caused_by"]) > 0

    # The JSON export carries the names as sent.
    items = client.get(f"/projects/{pid}/export", params={"format": "json"}).json()["items"]
    assert {(i["a"], i["b"]) for i in items if i["source"] == "asserted"} == (
        set(pairs) | {("limit", "a=b")})
