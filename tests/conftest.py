"""Shared fixtures: where the real dataset lives, and whether its absence is an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def dataset_dir() -> Path:
    return Path(os.environ.get("SPORAL_DATASETS", ROOT.parent / "shared" / "datasets")) / "al-cpl"


@pytest.fixture(scope="session")
def al_cpl() -> Path:
    """The AL-CPL folder; skips (or fails under SPORAL_REQUIRE_DATASETS=1) when absent."""
    path = dataset_dir()
    if not (path / "data_mining.pairs").exists():
        reason = f"the AL-CPL dataset is not at {path} (set SPORAL_DATASETS to its parent folder)"
        if os.environ.get("SPORAL_REQUIRE_DATASETS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path
