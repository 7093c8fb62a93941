"""The problem table is derived from the error classes; core errors are mapped too."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.errors import PROBLEMS, ServiceError, install_error_handlers
from reasoning.closure import Closure


def _kinds(cls: type[ServiceError]) -> list[type[ServiceError]]:
    return [cls] + [k for sub in cls.__subclasses__() for k in _kinds(sub)]


def test_every_error_class_is_one_documented_kind() -> None:
    classes = _kinds(ServiceError)
    slugs = [cls.slug for cls in classes]
    assert len(slugs) == len(set(slugs)), "two error classes share a problem type"
    assert set(slugs) == set(PROBLEMS)
    for cls in classes:
        kind = PROBLEMS[cls.slug]
        assert (kind.status, kind.title, kind.description) == (cls.status, cls.title,
                                                               cls.description)
        assert 400 <= kind.status < 600 and kind.title and kind.description


def test_errors_of_the_reasoning_core_become_problems() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/self-pair")
    def self_pair() -> None:
        Closure("ab").add_label("a", "a", True)

    @app.get("/contradiction")
    def contradiction() -> None:
        closure = Closure("ab")
        closure.add_label("a", "b", True)
        closure.add_label("b", "a", True)

    client = TestClient(app, raise_server_exceptions=False)
    refused = client.get("/self-pair")
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "/problems/invalid-label"
    conflict = client.get("/contradiction")
    assert conflict.status_code == 409 and conflict.json()["type"] == "/problems/contradiction"
