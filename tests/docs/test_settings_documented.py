"""docs/operating.md names every setting of the service with its environment variable."""

from __future__ import annotations

import re
from pathlib import Path

from app.settings import Settings

__all__: list[str] = []

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating.md"


def documented(text: str) -> set[str]:
    """The variables that start a row of the page's settings table."""
    return set(re.findall(r"^\| `(SPORAL_[A-Z_]+)` \|", text, flags=re.MULTILINE))


def test_every_setting_has_a_row_and_every_row_a_setting() -> None:
    prefix = Settings.model_config["env_prefix"]
    settings = {prefix + name.upper() for name in Settings.model_fields}
    rows = documented(PAGE.read_text(encoding="utf-8"))
    assert settings - rows == set(), "settings without a row in docs/operating.md"
    assert rows - settings == set(), "rows of docs/operating.md that are no setting"


def test_a_row_is_read_as_such() -> None:
    assert documented("| `SPORAL_X` | 1 | x |\n`SPORAL_Y` in text\n") == {"SPORAL_X"}
