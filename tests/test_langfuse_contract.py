"""A run's Langfuse traces, held to Langfuse's own OpenAPI document: `evalgate local` on the
`litellm` backend with Langfuse keys set sends its traces to a loopback stand-in
(tests/langfuse_standin.py) that validates every request and response against Langfuse's
published API description (tests/data/langfuse/, whole, with its source commit) with the same
validator as the fake GitHub, and fails the test on any exchange the document does not allow.

The end-to-end test is skipped without LiteLLM's proxy venv or without the Langfuse v2 SDK there;
the tests of the stand-in and of the document itself are not."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import OpenAPIV30SpecValidator

from evalgate.cli import main
from evalgate.serve import tracing
from evalgate.serve.litellm import litellm_python
from evalgate.serve.tracing import LANGFUSE_ENV
from tests.conftest import answer_arith, write_config
from tests.langfuse_standin import (
    DOCUMENT_DEFECTS,
    SPEC_PATH,
    LangfuseStandin,
    as_langfuse_reads_it,
    load_spec,
    running_standin,
)
from tests.openapi_contract import load_openapi

needs_proxy = pytest.mark.skipif(
    litellm_python(os.environ) is None or not tracing._langfuse_installed(os.environ),
    reason="needs LiteLLM's proxy (EVALGATE_LITELLM_PYTHON) with the Langfuse v2 SDK",
)

PUBLIC, SECRET = "pk-lf-contract", "sk-lf-contract"


@pytest.fixture
def langfuse() -> Iterator[LangfuseStandin]:
    """The stand-in; the test fails if any exchange broke Langfuse's OpenAPI document."""
    with running_standin(PUBLIC, SECRET) as standin:
        yield standin
    if standin.violations:
        pytest.fail(
            "exchanges that Langfuse's OpenAPI document does not allow:\n"
            + "\n".join(standin.violations),
            pytrace=False,
        )


def _traced_run(tmp_path: Path, scripted_server: Any, langfuse: LangfuseStandin) -> int:
    """`evalgate local` on the litellm backend, traced to the stand-in; waits for 3 generations
    (the SDK flushes from a background thread) or the first violation."""
    upstream = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"""
models:
  - name: traced
    backend: litellm
    model: openai/scripted
    api_base: "{upstream.base_url}"
    api_key_env: EVALGATE_TEST_UPSTREAM_KEY
benchmarks: [{{name: arith, kind: arith, size: 3}}]
""",
    )
    env = {k: v for k, v in os.environ.items() if k not in LANGFUSE_ENV}
    env |= {
        "CI": "1",
        "EVALGATE_TEST_UPSTREAM_KEY": "sk-upstream",
        "LANGFUSE_PUBLIC_KEY": PUBLIC,
        "LANGFUSE_SECRET_KEY": SECRET,
        "LANGFUSE_HOST": langfuse.url,
    }
    code = main(["local", str(config), "--output", str(tmp_path / "out")], environ=env)
    deadline = time.monotonic() + 30
    while sum(e["type"] == "generation-create" for e in langfuse.events) < 3:
        if langfuse.violations or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return code


@needs_proxy
@pytest.mark.slow
def test_a_runs_traces_follow_langfuses_openapi_document(
    tmp_path: Path, scripted_server: Any, langfuse: LangfuseStandin
) -> None:
    assert _traced_run(tmp_path, scripted_server, langfuse) == 0
    assert not langfuse.violations, langfuse.violations
    events = langfuse.events
    generations = [e["body"] for e in events if e["type"] == "generation-create"]
    assert len(generations) >= 3, [e["type"] for e in events]
    traces = {e["body"]["id"] for e in events if e["type"] == "trace-create"}
    assert all(g["traceId"] in traces for g in generations)  # every generation has its trace
    traced = " ".join(json.dumps(g.get("input")) for g in generations)
    (results,) = (tmp_path / "out" / "evals").glob("*/*/results.jsonl")
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == 3
    for rec in records:  # each of the run's own prompts has its generation
        assert json.dumps(rec["prompt"][-1]["content"]) in traced, (rec["prompt"], traced)


@needs_proxy
@pytest.mark.slow
def test_a_runs_traffic_that_breaks_the_document_is_caught(
    tmp_path: Path, scripted_server: Any
) -> None:
    # The mutant is the document: a generation's `model` must be an integer. The real traffic
    # (a string there) must now be a violation: the run's bodies are really held to the document.
    spec = as_langfuse_reads_it(load_spec())
    spec["components"]["schemas"]["CreateGenerationBody"]["properties"]["model"] = {
        "type": "integer"
    }
    strict = load_openapi(spec, check_document=False)
    with running_standin(PUBLIC, SECRET, strict) as langfuse:
        _traced_run(tmp_path, scripted_server, langfuse)
    assert langfuse.violations
    assert all("POST /api/public/ingestion" in v for v in langfuse.violations)
    wanted = "body/model: 'openai/scripted' is not of type 'integer'"
    assert any(wanted in v for v in langfuse.violations), langfuse.violations
    assert not any(e["type"] == "generation-create" for e in langfuse.events)  # none was kept


def _auth(public: str = PUBLIC, secret: str = SECRET) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode()}


TRACE = {
    "id": "ev-trace",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "type": "trace-create",
    "body": {"id": "trace-1", "name": "litellm-acompletion", "tags": ["evalgate"]},
}
GENERATION = {
    "id": "ev-gen",
    "timestamp": "2026-01-01T00:00:00.100Z",
    "type": "generation-create",
    "body": {
        "id": "gen-1",
        "traceId": "trace-1",
        "name": "litellm-acompletion",
        "startTime": "2026-01-01T00:00:00.000Z",
        "endTime": "2026-01-01T00:00:00.100Z",
        "model": "scripted",
        "modelParameters": {"max_tokens": 256, "temperature": 0.0, "stop": None},
        "input": [{"role": "user", "content": "What is 2 + 3?"}],
        "output": {"role": "assistant", "content": "5"},
        "usage": {"input": 7, "output": 1, "unit": "TOKENS", "totalCost": 0.0},
        "metadata": {"hidden_params": {}},
        "level": "DEFAULT",
    },
}


def _mutant(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    event = json.loads(json.dumps(GENERATION))
    node = event
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return event


def test_a_valid_batch_is_answered_207_per_event(langfuse: LangfuseStandin) -> None:
    body = {"batch": [TRACE, GENERATION], "metadata": {"sdk_name": "python"}}
    resp = httpx.post(f"{langfuse.url}/api/public/ingestion", json=body, headers=_auth())
    assert resp.status_code == 207, resp.text
    assert resp.json() == {
        "successes": [{"id": "ev-trace", "status": 201}, {"id": "ev-gen", "status": 201}],
        "errors": [],
    }
    assert [e["id"] for e in langfuse.events] == ["ev-trace", "ev-gen"]


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("body", "traceId"), 123, "body/traceId: 123 is not of type 'string'"),
        (("body", "startTime"), "yesterday", "body/startTime: 'yesterday' is not a 'date-time'"),
        (("body", "level"), "LOUD", "body/level: 'LOUD' is not one of"),
        (("body", "modelParameters"), {"stop": {"seq": "x"}}, "body/modelParameters/stop"),
        (("body", "endTime"), 17, "body/endTime: 17 is not of type 'string'"),
        (("type",), "generation-made", "type"),
    ],
)
def test_a_body_the_document_forbids_is_answered_500_and_recorded(
    langfuse: LangfuseStandin, path: tuple[str, ...], value: Any, reason: str
) -> None:
    body = {"batch": [TRACE, _mutant(path, value)]}
    resp = httpx.post(f"{langfuse.url}/api/public/ingestion", json=body, headers=_auth())
    assert resp.status_code == 500
    assert "request does not match the OpenAPI description" in resp.json()["message"]
    assert reason in resp.json()["message"], resp.json()["message"]
    assert len(langfuse.violations) == 1 and langfuse.events == []  # nothing was kept
    langfuse.violations.clear()  # deliberate: the fixture fails any test that leaves some


def test_what_the_document_says_in_prose_is_held_too(langfuse: LangfuseStandin) -> None:
    url = f"{langfuse.url}/api/public/ingestion"
    assert httpx.post(url, json={"events": [TRACE]}, headers=_auth()).status_code == 500
    assert httpx.post(url, json={"batch": [TRACE, TRACE]}, headers=_auth()).status_code == 500
    wrong = httpx.post(url, json={"batch": [TRACE]}, headers=_auth(secret="sk-wrong"))
    assert wrong.status_code == 401
    assert httpx.get(f"{langfuse.url}/api/public/traces", headers=_auth()).status_code == 404
    assert len(langfuse.violations) == 3, langfuse.violations
    assert "batch" in langfuse.violations[0] and "ids repeat" in langfuse.violations[1]
    assert "does not serve" in langfuse.violations[2]
    langfuse.violations.clear()


def test_the_document_is_langfuses_whole_and_recorded() -> None:
    readme = (SPEC_PATH.parent / "README.md").read_text(encoding="utf-8")
    text = gzip.decompress(SPEC_PATH.read_bytes())
    assert hashlib.sha256(text).hexdigest() in readme  # the README names what is committed
    spec = load_spec()
    assert spec["openapi"].startswith("3.0")
    assert "/api/public/ingestion" in spec["paths"] and len(spec["paths"]) > 50  # not a subset
    # The document's only defects as OpenAPI 3.0 are the ones the stand-in knows of.
    errors = list(OpenAPIV30SpecValidator(spec).iter_errors())
    assert {e.absolute_path[-1] for e in errors} == DOCUMENT_DEFECTS
    for name in DOCUMENT_DEFECTS:
        assert "const" in json.dumps(spec["components"]["schemas"][name])
    # Reading oneOf as anyOf changes nothing else: no oneOf has a discriminator to honour.
    assert '"discriminator"' not in json.dumps(spec)
    assert as_langfuse_reads_it(spec) == json.loads(
        json.dumps(spec).replace('"oneOf":', '"anyOf":')
    )
