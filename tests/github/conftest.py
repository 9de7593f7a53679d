"""Fixtures for the GitHub layer: a spec-validated fake GitHub on loopback, and clients for it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_github import TOKEN, FakeGitHub, load_spec, running_fake
from openapi_core import OpenAPI

from evalgate.publish.github import GitHubClient
from tests.openapi_contract import load_openapi

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def spec() -> dict[str, Any]:
    return load_spec()


@pytest.fixture(scope="session")
def openapi(spec: dict[str, Any]) -> OpenAPI:
    return load_openapi(spec)  # also validates the subset itself as an OpenAPI 3.0 document


@pytest.fixture(scope="session")
def pr_event() -> dict[str, Any]:
    return json.loads((DATA / "pull_request_event.json").read_text(encoding="utf-8"))


@pytest.fixture
def github(openapi: OpenAPI, spec: dict[str, Any]) -> Iterator[FakeGitHub]:
    """The fake GitHub; the test fails if any exchange broke GitHub's OpenAPI description."""
    with running_fake(openapi, spec) as fake:
        yield fake
    if fake.violations:
        pytest.fail(
            "exchanges that GitHub's OpenAPI description does not allow:\n"
            + "\n".join(fake.violations),
            pytrace=False,
        )


@pytest.fixture
def sleeps() -> list[float]:
    """Every backoff the client asked for, in seconds; nothing actually waits."""
    return []


@pytest.fixture
def client(github: FakeGitHub, sleeps: list[float]) -> Iterator[GitHubClient]:
    with GitHubClient(TOKEN, api_url=github.url, sleep=sleeps.append, timeout_s=5) as gh:
        yield gh
