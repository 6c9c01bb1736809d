"""Shared fixtures and the rule that GPU tests skip, with a reason, where no CUDA device exists."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is available on this machine")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_course_device(monkeypatch):
    """Tests must not depend on the developer's COURSE_DEVICE (get_device obeys it)."""
    monkeypatch.delenv("COURSE_DEVICE", raising=False)


@pytest.fixture(scope="session")
def course_root() -> Path:
    return ROOT
