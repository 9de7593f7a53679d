"""The JSON Schema of evals.yaml, for editors (`evalgate schema`, committed as evals.schema.json).

pydantic writes the document's schema, but a benchmark entry is validated in two steps (a
registry name with overrides, or an inline benchmark with ``kind``) and the loader merges layers
before the kind's model sees them. Here the entry becomes what the loader accepts: a string, a
registry entry whose fields are those of some benchmark kind, or an inline benchmark — a union
discriminated by ``kind`` — so an editor flags ``scorrer:``, ``num_examples: -5`` and
``scorer: {type: fuzzy}`` like `evalgate validate` does. Imported only by `evalgate schema`.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from evalgate.config.load import EvalsFile
from evalgate.config.spec import Benchmark

__all__ = ["json_schema"]

_REF = "#/$defs/{model}"


def _registry_entry(defs: dict[str, Any], kinds: list[str]) -> dict[str, Any]:
    """Any field some benchmark kind has, except ``kind``: what a registry entry may override."""
    properties: dict[str, Any] = {}
    for name in kinds:
        for field, spec in defs[name].get("properties", {}).items():
            if field != "kind":
                properties.setdefault(field, spec)
    properties["name"] = {
        "type": "string",
        "description": "Registry name (see `evalgate benchmarks`) or your benchmarks/NAME.yaml.",
    }
    return {
        "type": "object",
        "title": "RegistryBenchmark",
        "description": "A registry benchmark by name, with overrides of its fields.",
        "properties": properties,
        "required": ["name"],
        "additionalProperties": False,
    }


def json_schema() -> dict[str, Any]:
    schema = EvalsFile.model_json_schema(ref_template=_REF)
    inline = TypeAdapter(Benchmark).json_schema(ref_template=_REF)
    defs = schema.setdefault("$defs", {})
    defs.update(inline.pop("$defs", {}))
    kinds = [ref["$ref"].rsplit("/", 1)[1] for ref in inline["oneOf"]]
    defs["RegistryBenchmark"] = _registry_entry(defs, kinds)
    defs["InlineBenchmark"] = {"title": "InlineBenchmark", **inline}
    defs.pop("BenchmarkEntry", None)
    schema["properties"]["benchmarks"]["items"] = {
        "anyOf": [
            {"type": "string", "description": "A registry benchmark by name."},
            {"$ref": "#/$defs/RegistryBenchmark"},
            {"$ref": "#/$defs/InlineBenchmark"},
        ]
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalgate evals.yaml"
    return schema
