"""Shared test setup: the repository root and a Hypothesis profile that keeps
property tests reproducible and bounded on CI's 2 cores."""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]

settings.register_profile("tierlab", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tierlab")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
