"""``/docs`` and ``/redoc`` work with no internet: every asset they load is served by the app.

The pages are parsed for every ``src``/``href``-like attribute and every string in their
inline scripts; none may point at another host, and each path they load must answer 200 with
a fitting content type from the service itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from app.routes.docs import STATIC_DIR
from tests.api.conftest import ADMIN_KEY

PAGES = ["/docs", "/redoc", "/docs/oauth2-redirect"]
# A reference that leaves the service: a scheme (http:, https:, data:, ...) or "//host"
# (browsers read backslashes there as slashes).
EXTERNAL = re.compile(r"^\s*(?:[a-zA-Z][a-zA-Z0-9+.-]*:|[/\\]{2})")
URL_ATTRIBUTES = {"src", "href", "spec-url", "action", "srcset", "poster", "data"}
QUOTED = re.compile(r"""(['"`])((?:(?!\1).)*)\1""")


class _References(HTMLParser):
    """The URL-valued attributes of a page and the text of its inline scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.attributes: list[tuple[str, str, str]] = []
        self.inline: list[str] = []
        self._in_inline = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in URL_ATTRIBUTES and value is not None:
                self.attributes.append((tag, name, value))
        self._in_inline = tag in ("script", "style") and not dict(attrs).get("src")

    def handle_endtag(self, tag: str) -> None:
        self._in_inline = False

    def handle_data(self, data: str) -> None:
        if self._in_inline:
            self.inline.append(data)


def _references(html: str) -> _References:
    parser = _References()
    parser.feed(html)
    parser.close()
    return parser


def _script_strings(parser: _References) -> list[str]:
    return [m.group(2) for text in parser.inline for m in QUOTED.finditer(text)]


def _loaded_paths(client: TestClient, page: str) -> dict[str, str]:
    """Each path ``page`` makes the browser load, with the tag that loads it."""
    parser = _references(client.get(page).text)
    paths = {value: f"<{tag} {name}>" for tag, name, value in parser.attributes}
    paths.update({s: "script string" for s in _script_strings(parser) if s.startswith("/")})
    return paths


@pytest.mark.parametrize("page", PAGES)
def test_docs_pages_reference_nothing_outside_the_service(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    parser = _references(response.text)
    external = [f"<{tag} {name}={value!r}>" for tag, name, value in parser.attributes
                if EXTERNAL.match(value)]
    external += [f"script string {s!r}" for s in _script_strings(parser) if EXTERNAL.match(s)]
    assert not external, f"{page} loads from outside the service: {external}"
    assert "googleapis" not in response.text and "cdn." not in response.text


def test_docs_pages_load_their_assets_and_schema_from_the_service(client: TestClient) -> None:
    expected = {
        "/openapi.json": ("application/json", 1_000),
        "/docs/oauth2-redirect": ("text/html", 500),
        "/static/vendor/swagger-ui/swagger-ui-bundle.js": ("text/javascript", 500_000),
        "/static/vendor/swagger-ui/swagger-ui.css": ("text/css", 50_000),
        "/static/vendor/swagger-ui/favicon-32x32.png": ("image/png", 100),
        "/static/vendor/redoc/redoc.standalone.js": ("text/javascript", 500_000),
    }
    loaded = {**_loaded_paths(client, "/docs"), **_loaded_paths(client, "/redoc")}
    assert set(loaded) == set(expected), loaded
    for path, (content_type, min_size) in expected.items():
        response = client.get(path)
        assert response.status_code == 200, (path, loaded[path])
        assert response.headers["content-type"].split(";")[0] == content_type, path
        assert len(response.content) >= min_size, path


def test_vendored_bundles_are_the_libraries_the_pages_call(client: TestClient) -> None:
    swagger = client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js").text
    redoc = client.get("/static/vendor/redoc/redoc.standalone.js").text
    assert "SwaggerUIBundle=" in swagger  # the global the /docs page calls
    assert ".Redoc=" in redoc and 'getAttribute("spec-url")' in redoc  # reads <redoc spec-url>
    for package in ("swagger-ui", "redoc"):
        assert (STATIC_DIR / "vendor" / package / "LICENSE").stat().st_size > 500


def test_docs_and_assets_need_no_api_key(make_client: Callable[..., TestClient]) -> None:
    keyed = make_client(admin_key=ADMIN_KEY)
    assert keyed.get("/projects").status_code == 401  # keys are really on
    for path in ["/docs", "/redoc", "/docs/oauth2-redirect", "/openapi.json",
                 "/static/vendor/redoc/redoc.standalone.js"]:
        assert keyed.get(path).status_code == 200, path


def test_docs_routes_stay_out_of_the_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc", "/static"))]


def test_static_files_serve_only_the_static_directory(client: TestClient) -> None:
    assert client.get("/static/vendor/swagger-ui/missing.js").status_code == 404
    assert client.get("/static/../main.py").status_code == 404
    assert client.get("/static/%2e%2e/main.py").status_code == 404


def test_docs_pages_follow_the_proxy_prefix(client: TestClient) -> None:
    behind_proxy = TestClient(client.app, root_path="/sporal")
    for page in ("/docs", "/redoc"):
        loaded = _loaded_paths(behind_proxy, page)
        assert loaded and all(path.startswith("/sporal/") for path in loaded), loaded
