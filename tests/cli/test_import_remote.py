"""`sporal import --url`: against a real `sporal serve`, a 202 is followed until its job ends;
the summary printed as for a synchronous answer, a failed job's problem as a refusal's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from benchmarks.serving import Server

THRESHOLD = 400
"""The server's SPORAL_IMPORT_ASYNC_BYTES: the small file is under it, the large one over."""

SMALL = "".join(json.dumps({"kind": "concept", "name": f"c{k}"}) + "\n" for k in range(3))
LARGE = "".join([json.dumps({"kind": "concept", "name": f"d{k}"}) + "\n" for k in range(20)]
                + [json.dumps({"kind": "label", "a": f"d{k}", "b": f"d{k + 1}",
                               "label": "positive"}) + "\n" for k in range(19)])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("remote-import")
    with Server(f"sqlite:///{folder / 'sporal.db'}", folder,
                env={"SPORAL_IMPORT_ASYNC_BYTES": str(THRESHOLD)}) as running:
        yield running


def run(server: Server, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["import", "--url", server.base_url, *args])
    return result.exit_code, result.stdout, result.stderr


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_large_file_is_followed_as_a_job_and_its_summary_printed(
        server: Server, tmp_path: Path) -> None:
    assert len(SMALL) < THRESHOLD < len(LARGE)
    code, out, err = run(server, "--file", _file(tmp_path, "large.jsonl", LARGE),
                         "--project", "large")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["concepts_created"], summary["labels_created"]) == (20, 19), summary
    assert "location" not in summary and "state" not in summary  # the result, not the job
    counts = httpx.get(f"{server.base_url}/projects/{summary['project']}").json()["counts"]
    assert counts["asserted_labels"] == 19


def test_async_asks_for_a_job_and_prints_the_same_summary(
        server: Server, tmp_path: Path) -> None:
    path = _file(tmp_path, "small.jsonl", SMALL)
    code, out, err = run(server, "--file", path, "--project", "sync")
    assert code == 0, err
    sync = json.loads(out.strip().splitlines()[-1])
    code, out, err = run(server, "--file", path, "--project", "job", "--async")
    assert code == 0, err
    job = json.loads(out.strip().splitlines()[-1])
    assert job.pop("project") != sync.pop("project")
    assert job.pop("api_key") != sync.pop("api_key") and job == sync  # two projects, two keys


def test_a_failed_job_prints_its_problem_with_every_line_never_a_traceback(
        server: Server, tmp_path: Path) -> None:
    bad = LARGE + json.dumps({"kind": "label", "a": "d1", "b": "nowhere",
                              "label": "positive"}) + "\n"
    code, out, err = run(server, "--file", _file(tmp_path, "bad.jsonl", bad),
                         "--project", "bad")
    assert code == 1 and out == ""
    assert "422 " in err and "line 40: unknown concept" in err, err
    assert "Traceback" not in err


def test_async_without_url_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["import", "--file", _file(tmp_path, "x.jsonl", SMALL),
                                      "--project", "p", "--async"])
    assert result.exit_code == 1 and "--async" in result.stderr
