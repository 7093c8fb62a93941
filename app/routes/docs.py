"""``/docs`` (Swagger UI) and ``/redoc`` served with no internet.

FastAPI's own pages load their JavaScript, CSS, favicon and fonts from CDNs, so they are blank
offline. These routes render the same pages with every asset served by the service itself
from ``app/static/vendor`` (see its README for the versions and how to refresh them). Like
FastAPI's, they stay out of the OpenAPI schema and ask no API key.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "STATIC_URL", "install_docs"]

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
STATIC_URL = "/static"
_SWAGGER_UI = f"{STATIC_URL}/vendor/swagger-ui"
_REDOC = f"{STATIC_URL}/vendor/redoc"
_FAVICON = f"{_SWAGGER_UI}/favicon-32x32.png"
# ReDoc 2 draws Redocly's logo from cdn.redoc.ly in its side menu, with no option to turn it
# off; this policy keeps the page to the service's own files (the logo is simply not shown).
# ReDoc's styles are injected at run time and its search runs in a blob: worker.
REDOC_CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
             "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; "
             "frame-ancestors 'none'")


def _root_path(request: Request) -> str:
    """The prefix the service is mounted under behind a proxy ('' when none)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def install_docs(app: FastAPI) -> None:
    """Mount the vendored assets at ``/static`` and add the offline ``/docs`` and ``/redoc``.

    ``app`` must be built with ``docs_url=None, redoc_url=None`` (else FastAPI's CDN pages
    answer first); its ``openapi_url``, Swagger UI parameters and OAuth2 redirect URL are
    honoured as FastAPI's own pages do.
    """
    if app.openapi_url is None:
        return
    openapi_url = app.openapi_url
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="static")
    redirect_url = app.swagger_ui_oauth2_redirect_url
    # No online validator: Swagger UI would otherwise send the schema's URL to swagger.io.
    parameters = {"validatorUrl": None, **(app.swagger_ui_parameters or {})}

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root_path(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{_SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{_SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=root + _FAVICON,
            oauth2_redirect_url=root + redirect_url if redirect_url else None,
            init_oauth=app.swagger_ui_init_oauth,
            swagger_ui_parameters=parameters,
        )

    if redirect_url:
        @app.get(redirect_url, include_in_schema=False)
        def swagger_ui_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = _root_path(request)
        page = get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{_REDOC}/redoc.standalone.js",
            redoc_favicon_url=root + _FAVICON,
            with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = REDOC_CSP
        return page
