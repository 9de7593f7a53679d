"""The ground truth itself: the committed OpenAPI subset, the fake's enforcement, the fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import extract_spec
import httpx
from fake_github import BODY_LIMIT, TOKEN, FakeGitHub, schema_validator

from evalgate.publish.github import API_VERSION

DATA = Path(__file__).resolve().parent / "data"
HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": API_VERSION,
    "Authorization": f"Bearer {TOKEN}",
    "User-Agent": "evalgate-tests",
}


def test_subset_records_its_source_and_keeps_only_what_we_use(spec: dict[str, Any]) -> None:
    meta = spec["info"]["x-evalgate-subset"]
    assert meta["package"] == "@octokit/openapi"
    assert meta["version"] == extract_spec.PINNED_VERSION == spec["info"]["version"]
    ops = {op["operationId"] for item in spec["paths"].values() for op in item.values()}
    assert ops == set(extract_spec.OPERATIONS)
    # Every $ref resolves inside the subset.
    text = json.dumps(spec)
    for kind, entries in spec["components"].items():
        for name in entries:
            assert f'"#/components/{kind}/{name}"' in text or name == "basic-error"
    refs = extract_spec._all_refs(spec)
    assert all(extract_spec._resolve(spec, ref) is not None for ref in refs)


def test_extract_is_deterministic_on_its_own_output(spec: dict[str, Any]) -> None:
    # The subset is a fixed point: extracting from it again keeps everything it has.
    again = extract_spec.extract(spec, extract_spec.PINNED_VERSION)
    assert again["paths"] == spec["paths"]
    assert again["components"] == spec["components"]


def test_invalid_request_is_answered_500_and_recorded(github: FakeGitHub) -> None:
    url = f"{github.url}/repos/octo-org/evals-demo/issues/42/comments"
    resp = httpx.post(url, json={"body": 12345}, headers=HEADERS)
    assert resp.status_code == 500
    assert "request does not match the OpenAPI description" in resp.json()["message"]
    assert "is not of type 'string'" in resp.json()["message"]
    bad_page = httpx.get(url, params={"per_page": "many"}, headers=HEADERS)
    assert bad_page.status_code == 500
    assert len(github.violations) == 2
    assert github.bodies("octo-org/evals-demo", 42) == []  # nothing was acted on
    github.violations.clear()  # deliberate: the fixture fails any test that leaves some


def test_missing_api_version_header_is_a_violation(github: FakeGitHub) -> None:
    headers = {k: v for k, v in HEADERS.items() if k != "X-GitHub-Api-Version"}
    resp = httpx.get(f"{github.url}/repos/octo-org/evals-demo/issues/42/comments", headers=headers)
    assert resp.status_code == 500 and "X-GitHub-Api-Version" in resp.json()["message"]
    github.violations.clear()


def test_invalid_response_is_caught_before_it_is_sent(github: FakeGitHub) -> None:
    github.seed("octo-org/evals-demo", 42, ["hello"])
    github.comments["octo-org/evals-demo", 42][0]["created_at"] = "yesterday"  # not a date-time
    resp = httpx.get(f"{github.url}/repos/octo-org/evals-demo/issues/42/comments", headers=HEADERS)
    assert resp.status_code == 500
    assert "response does not match the OpenAPI description" in resp.json()["message"]
    github.violations.clear()


def test_body_over_github_limit_is_rejected_422_like_github(github: FakeGitHub) -> None:
    url = f"{github.url}/repos/octo-org/evals-demo/issues/42/comments"
    assert httpx.post(url, json={"body": "x" * BODY_LIMIT}, headers=HEADERS).status_code == 201
    resp = httpx.post(url, json={"body": "x" * (BODY_LIMIT + 1)}, headers=HEADERS)
    assert resp.status_code == 422
    assert "maximum is 65536 characters" in resp.json()["errors"][0]["message"]


def test_wrong_token_gets_401_bad_credentials(github: FakeGitHub) -> None:
    headers = {**HEADERS, "Authorization": "Bearer wrong"}
    resp = httpx.get(f"{github.url}/repos/octo-org/evals-demo/issues/42/comments", headers=headers)
    assert resp.status_code == 401 and resp.json()["message"] == "Bad credentials"


def test_pull_request_event_fixtures_match_the_webhook_schema(spec: dict[str, Any]) -> None:
    validator = schema_validator(spec, "webhook-pull-request-opened")
    for name in ("pull_request_event.json", "pull_request_event_fork.json"):
        event = json.loads((DATA / name).read_text(encoding="utf-8"))
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(event)]
        assert errors == [], name
        pr = event["pull_request"]
        assert event["number"] == pr["number"]
        assert len(pr["head"]["sha"]) == len(pr["base"]["sha"]) == 40
        assert pr["base"]["ref"] == "main"
        assert event["repository"]["full_name"] == pr["base"]["repo"]["full_name"]
    fork = json.loads((DATA / "pull_request_event_fork.json").read_text(encoding="utf-8"))
    assert fork["pull_request"]["head"]["repo"]["fork"] is True
    assert fork["pull_request"]["head"]["repo"]["full_name"] != fork["repository"]["full_name"]


def test_webhook_validator_rejects_a_broken_payload(spec: dict[str, Any], pr_event: Any) -> None:
    broken = json.loads(json.dumps(pr_event))
    del broken["pull_request"]["head"]["sha"]
    assert any(
        "'sha' is a required" in e.message
        for e in schema_validator(spec, "webhook-pull-request-opened").iter_errors(broken)
    )
