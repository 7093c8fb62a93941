"""The export formats are a registry: the route serves each one, and nothing else."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.errors import ValidationFailed
from app.schemas import ProjectRead
from app.services.export import FORMAT_NAMES, FORMATS, ExportFormat, export, get_format
from tests.api.conftest import assert_problem, label, new_project


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_NAMES)
def test_every_registered_format_exports_with_its_media_type(client: TestClient,
                                                             fmt: ExportFormat) -> None:
    pid = new_project(client, ["a", "b", "c"])
    assert label(client, pid, "a", "b").status_code == 201
    assert label(client, pid, "b", "c").status_code == 201

    response = client.get(f"/projects/{pid}/export", params={"format": fmt.name})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == fmt.media_type
    assert response.headers["content-disposition"] == (
        f'attachment; filename="project-{pid}.{fmt.suffix}"')
    shown = client.get(f"/projects/{pid}").json()  # ProjectRead and more
    project = {name: shown[name] for name in ProjectRead.model_fields}
    quality = client.get(f"/projects/{pid}/quality").json() if fmt.quality else None
    with client.app.state.database.sessions() as session:  # type: ignore[attr-defined]
        written = "".join(fmt.writer(session, project, quality))
    assert response.text == written and "c" in written  # its writer's text, concepts named
    assert ('"quality"' in written) is fmt.quality  # the map's quality where it carries it


def test_the_route_offers_the_registry_in_its_order() -> None:
    from app.main import create_app

    document = create_app().openapi()
    get = document["paths"]["/projects/{project_id}/export"]["get"]
    [schema] = [p["schema"] for p in get["parameters"] if p["name"] == "format"]
    assert tuple(schema["enum"]) == FORMAT_NAMES and schema["default"] == FORMAT_NAMES[0]
    assert set(get["responses"]["200"]["content"]) == {f.media_type for f in FORMATS}


def test_an_unknown_format_is_an_error_never_a_fallback(client: TestClient) -> None:
    pid = new_project(client, ["a", "b"])
    assert_problem(client.get(f"/projects/{pid}/export", params={"format": "xml"}), 422,
                   "validation-error")
    with pytest.raises(ValidationFailed) as raised:
        get_format("xml")
    assert raised.value.members["errors"][0]["loc"] == ["format"]
    with client.app.state.database.sessions() as session, \
            pytest.raises(ValidationFailed):  # type: ignore[attr-defined]
        export(session, {"id": pid}, "GraphML")  # names are exact: no case folding


def test_a_format_is_found_by_its_name_or_as_itself() -> None:
    for fmt in FORMATS:
        assert get_format(fmt.name) is fmt and get_format(fmt) is fmt
    assert len(set(FORMAT_NAMES)) == len(FORMATS)
