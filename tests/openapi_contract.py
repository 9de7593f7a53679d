"""One validator for the stand-ins of foreign APIs, each held to its vendor's own OpenAPI document.

The fake GitHub (``tests/github/fake_github.py``, GitHub's description) and the Langfuse stand-in
(``tests/langfuse_standin.py``, Langfuse's) both check every request before they act on it and
every response before they send it with the same openapi-core machinery, loaded here, and
describe a mismatch the same way: one validator, one document per API.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from openapi_core import Config, OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_schema_validator import OAS30Validator, oas30_format_checker

__all__ = [
    "describe",
    "load_document",
    "load_openapi",
    "mock_request",
    "request_error",
    "response_error",
    "schema_validator",
]


def load_document(path: Path) -> dict[str, Any]:
    """An OpenAPI document as committed: JSON or YAML, gzipped where the name ends ``.gz``."""
    raw = path.read_bytes()
    name = path.name
    if name.endswith(".gz"):
        raw, name = gzip.decompress(raw), name[: -len(".gz")]
    text = raw.decode("utf-8")
    if name.endswith(".json"):
        return json.loads(text)
    # CSafeLoader where libyaml is there: Langfuse's document is half a megabyte.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def load_openapi(spec: dict[str, Any], *, check_document: bool = True) -> OpenAPI:
    """The validator for ``spec``. ``check_document`` also validates the document itself as
    OpenAPI 3.0; off only for a document whose known defects a test pins (see the caller)."""
    if check_document:
        return OpenAPI.from_dict(spec)
    return OpenAPI.from_dict(spec, config=Config(spec_validator_cls=None))


def mock_request(
    server: str, method: str, target: str, headers: dict[str, str], raw: bytes
) -> tuple[MockRequest, str, dict[str, str]]:
    """(the request as openapi-core reads it, its path, its query) for a stand-in's request:
    ``target`` as the HTTP request line has it, on the document's ``server``."""
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    content_type = headers.get("content-type", "application/json").split(";")[0].strip()
    request = MockRequest(
        server,
        method.lower(),
        split.path,
        args=query,
        headers=headers,
        data=raw or None,
        content_type=content_type,
    )
    return request, split.path, query


def request_error(openapi: OpenAPI, request: MockRequest) -> Exception | None:
    """Why ``request`` breaks the description, or None."""
    try:
        openapi.validate_request(request)
    except Exception as exc:  # openapi-core raises a family of errors; all are violations
        return exc
    return None


def response_error(
    openapi: OpenAPI, request: MockRequest, response: MockResponse
) -> Exception | None:
    """Why ``response`` (to ``request``) breaks the description, or None."""
    try:
        openapi.validate_response(request, response)
    except Exception as exc:
        return exc
    return None


def schema_validator(spec: dict[str, Any], name: str) -> OAS30Validator:
    """A validator for ``components/schemas/NAME`` of ``spec``, with its $refs and formats."""
    root = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    return OAS30Validator(root, format_checker=oas30_format_checker)


def describe(exc: BaseException) -> str:
    """openapi-core's message plus the schema errors it keeps on its causes."""
    # openapi-core's own message repeats the whole body: cut, so the reasons below stay visible.
    head = str(exc)
    parts = [f"{type(exc).__name__}: {head[:300]}{' …' if len(head) > 300 else ''}"]
    cause = exc.__cause__
    while cause is not None:
        for err in getattr(cause, "schema_errors", ()) or ():
            parts.append(_schema_error(err))
        cause = cause.__cause__
    return " | ".join(dict.fromkeys(parts))[:2000]


def _schema_error(err: Any) -> str:
    """A schema error, with the path of the value it is about, and for a ``oneOf`` that no
    branch matched (Langfuse's event union), the deepest reason among its branches."""
    where = "/".join(map(str, getattr(err, "absolute_path", ()) or ()))
    message = getattr(err, "message", str(err))
    context = list(getattr(err, "context", ()) or ())
    if context:
        deepest = max(context, key=lambda e: len(list(e.absolute_path)))
        inner = "/".join(map(str, deepest.absolute_path))
        message = f"{message.split(' is not valid under')[0][:120]} … {inner}: {deepest.message}"
    return f"{where}: {message}" if where else message
