"""/ui/'s files and the map's layout library, served by the service with a policy that lets the
pages load nothing from elsewhere; /redoc's policy (its page is checked in Chromium too)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.routes.docs import STATIC_DIR


def test_the_ui_loads_dagre_from_the_service_under_its_policy(client: TestClient) -> None:
    page = client.get("/ui/")
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    assert scripts == ["vendor/dagre/dagre.min.js", "map.js", "app.js", "review.js"]
    for script in scripts:
        response = client.get(f"/ui/{script}")
        assert response.status_code == 200, script
        assert response.headers["content-type"].startswith("text/javascript")
        assert response.headers["content-security-policy"].startswith("default-src 'self'")
    # the global that map.js uses
    assert "var dagre=" in client.get("/ui/vendor/dagre/dagre.min.js").text
    assert (STATIC_DIR / "vendor" / "dagre" / "LICENSE").read_text().startswith("Copyright")
    assert client.get("/ui/vendor/dagre/missing.js").status_code == 404
    assert client.get("/ui/vendor/dagre/../../routes/ui.py").status_code == 404


def test_redoc_may_load_only_from_the_service(client: TestClient) -> None:
    policy = client.get("/redoc").headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["img-src"] == "'self' data:"  # not cdn.redoc.ly's logo
    assert "http" not in policy
