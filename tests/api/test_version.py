"""The service reports the installed package's version."""

from __future__ import annotations

from importlib.metadata import version

from fastapi.testclient import TestClient

from app import __version__


def test_health_and_the_schema_report_the_package_version(client: TestClient) -> None:
    assert __version__ == version("sporal")
    body = client.get("/health").json()
    assert body["version"] == __version__
    assert body["status"] == "ok"
    assert client.get("/openapi.json").json()["info"]["version"] == __version__
