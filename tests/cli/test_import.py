"""`sporal import` in-process: an AL-CPL domain or a file into a project of the database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from app.settings import Settings, get_settings


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'import.db'}"
    monkeypatch.setenv("SPORAL_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["import", *args])
    return result.exit_code, result.stdout, result.stderr


def test_al_cpl_domain_is_imported_with_its_labels_then_adopted(
        database: str, al_cpl: Path) -> None:
    code, out, err = run("--al-cpl", str(al_cpl), "--domain", "data_mining",
                         "--project", "dm", "--with-labels")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["concepts_created"], summary["pairs_created"],
            summary["labels_created"]) == (120, 826, 826)
    assert "api_key" in err and summary["api_key"] in err  # printed once, on both streams
    code, out, _ = run("--al-cpl", str(al_cpl), "--domain", "data_mining", "--project", "dm")
    again = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and again["project"] == summary["project"]
    assert "api_key" not in again  # an adopted project's key is not shown again
    assert (again["concepts_known"], again["pairs_unchanged"]) == (120, 826)
    with TestClient(create_app(Settings(database_url=database, warm_up=False))) as client:
        detail = client.get(f"/projects/{summary['project']}").json()
        status = client.get(f"/projects/{summary['project']}/pairs/status", params={
            "a": "Conditional_probability", "b": "Decision_tree_model"}).json()
    assert detail["counts"]["asserted_labels"] == 826
    # Theorem 2's upper bound counts the positives: the domain's 292 rows and what they imply.
    assert detail["query_bounds"]["upper"] == 292 + detail["counts"]["inferred_positive"]
    assert status["status"] == "positive" and status["source"] == "asserted"


def test_a_bad_file_is_refused_with_its_lines_and_nothing_written(
        database: str, tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("a,b,label\nx,y,positive\nx,y,maybe\n", encoding="utf-8")
    code, out, err = run("--file", str(path), "--project", "p")
    assert code == 1 and out == ""
    assert "line 2: unknown concept 'x', 'y'" in err and "line 3:" in err
    concepts = tmp_path / "concepts.jsonl"
    concepts.write_text('{"kind": "concept", "name": "x"}\n{"kind": "concept", "name": "y"}\n',
                        encoding="utf-8")
    assert run("--file", str(concepts), "--project", "p")[0] == 0
    code, out, err = run("--file", str(path), "--project", "p")
    assert code == 1 and "line 3:" in err and "line 2" not in err


def test_unreadable_lines_are_printed_as_the_route_names_them_never_a_traceback(
        database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPORAL_MAX_IMPORT_LINE_BYTES", "200000")
    get_settings.cache_clear()
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b'{"kind": "concept", "name": "x"}\n' + b"[" * 100_000 + b"\n"
                     + b'{"kind": "concept", "name": "' + b"y" * 300_000 + b'"}\n')
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_bytes(b"name\nlimit\xff\n")
    for path, expected in ((deep, ["line 2: nested deeper than 64",
                                   "line 3: longer than 200000 bytes"]),
                           (bad_csv, ["line 2: not UTF-8"])):
        result = CliRunner().invoke(cli, ["import", "--file", str(path), "--project", "p"])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.stderr and result.stdout == ""
        for line in expected:
            assert line in result.stderr, result.stderr
    missing = CliRunner().invoke(cli, ["import", "--file", str(tmp_path / "no.jsonl"),
                                       "--project", "p"])
    assert missing.exit_code == 1 and "no such file" in missing.stderr


def test_policy_and_question_create_then_switch_the_project(database: str,
                                                            tmp_path: Path) -> None:
    lines = [{"kind": "concept", "name": n} for n in ("a", "b", "c")] + [
        {"kind": "label", "a": "a", "b": "b", "label": "positive", "annotator": "ann"},
        {"kind": "label", "a": "a", "b": "b", "label": "negative", "annotator": "bob"}]
    data = tmp_path / "team.jsonl"
    data.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    code, out, err = run("--file", str(data), "--project", "team", "--policy", "consensus",
                         "--question", "Does {a} come before {b}?")
    assert code == 0, err
    pid = json.loads(out.strip().splitlines()[-1])["project"]
    with TestClient(create_app(Settings(database_url=database, warm_up=False))) as client:
        detail = client.get(f"/projects/{pid}").json()
        # consensus: the contradicting answer is kept as an answer, not refused
        answers = client.get(f"/projects/{pid}/answers").json()["items"]
    assert (detail["policy"], detail["question"]) == ("consensus", "Does {a} come before {b}?")
    assert [a["annotator"] for a in answers] == ["ann", "bob"]
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"kind": "concept", "name": "d"}) + "\n")
    code, out, err = run("--file", str(more), "--project", "team", "--policy", "strict")
    assert code == 0, err
    with TestClient(create_app(Settings(database_url=database, warm_up=False))) as client:
        detail = client.get(f"/projects/{pid}").json()
    assert (detail["policy"], detail["question"]) == ("strict", "Does {a} come before {b}?")


def test_an_unknown_policy_is_refused_before_anything(database: str, tmp_path: Path) -> None:
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"kind": "concept", "name": "a"}) + "\n")
    code, out, err = run("--file", str(data), "--project", "p", "--policy", "loose")
    assert code == 1 and out == ""
    assert "--policy" in err
