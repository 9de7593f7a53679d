"""The JSON Schema of evals.yaml, for editors (`evalgate schema`, committed as evals.schema.json).

pydantic writes the document's schema, but a benchmark entry is validated in two steps (a
registry name with overrides, or an inline benchmark with ``kind``) and the loader merges layers
before the kind's model sees them. Here the entry becomes what the loader accepts: a string, a
registry entry whose fields are those of some benchmark kind, or an inline benchmark — a union
discriminated by ``kind`` — so an editor flags ``scorrer:``, ``num_examples: -5`` and
``scorer: {type: fuzzy}`` like `evalgate validate` does. Imported only by `evalgate schema`.
"""

from __future__ import annotations

import ast
import inspect
import sys

from pydantic import BaseModel, TypeAdapter

from evalgate.config import load, spec
from evalgate.config.load import EvalsFile
from evalgate.config.spec import Benchmark
from evalgate.config.spec._base import is_section

__all__ = ["json_schema"]

_REF = "#/$defs/{model}"

Node = dict[str, object]  # a JSON Schema node: JSON, read through _node


def _node(parent: object, key: str) -> Node:
    """``parent[key]`` when both are JSON objects (the same object, so edits land in it); else
    an empty one."""
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, dict) else {}


def _registry_entry(defs: Node, kinds: list[str]) -> Node:
    """Any field some benchmark kind has, except ``kind``: what a registry entry may override."""
    properties: Node = {}
    for name in kinds:
        for field, field_schema in _node(_node(defs, name), "properties").items():
            if field != "kind":
                properties.setdefault(field, field_schema)
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


def _field_docs(cls: type) -> dict[str, str]:
    """The string literal under each annotated field of ``cls`` (PEP 257 attribute docstrings)."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
    except (OSError, TypeError):
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            docs = {}
            for field, doc in zip(node.body, [*node.body[1:], None], strict=True):
                if (
                    isinstance(field, ast.AnnAssign)
                    and isinstance(field.target, ast.Name)
                    and isinstance(doc, ast.Expr)
                    and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)
                ):
                    docs[field.target.id] = inspect.cleandoc(doc.value.value)
            return docs
    return {}


def _describe(defs: Node) -> None:
    """Field docstrings as ``description``s (the runtime models skip reading them: start-up)."""
    for name, cls in _models().items():
        properties = _node(_node(defs, name), "properties")
        for base in cls.__mro__:  # an inherited field is documented where it is declared
            if base.__module__.startswith("evalgate."):
                for field, doc in _field_docs(base).items():
                    if field in properties:
                        _node(properties, field).setdefault("description", doc)


def _models() -> dict[str, type[BaseModel]]:
    return {
        name: obj
        for module in (spec, load)
        for name, obj in vars(module).items()
        if isinstance(obj, type) and issubclass(obj, BaseModel)
    }


def _nullable_sections(defs: Node) -> None:
    """`sampling:` left empty (null) is accepted as an empty section (see Strict); say so."""
    for name, cls in _models().items():
        properties = _node(_node(defs, name), "properties")
        for field in properties:
            prop = _node(properties, field)
            if not is_section(cls, field):
                continue
            if "$ref" in prop:
                ref = prop.pop("$ref")
                prop["anyOf"] = [{"$ref": ref}, {"type": "null"}]
            elif prop.get("type") == "object":
                prop["type"] = ["object", "null"]


def json_schema() -> Node:
    schema: Node = EvalsFile.model_json_schema(ref_template=_REF)
    inline: Node = TypeAdapter(Benchmark).json_schema(ref_template=_REF)
    defs = schema.setdefault("$defs", {})
    assert isinstance(defs, dict)  # pydantic's: a JSON object
    defs.update(_node(inline, "$defs"))
    inline.pop("$defs", None)
    defs["EvalsFile"] = schema  # so the document's own fields get theirs
    _describe(defs)
    _nullable_sections(defs)
    del defs["EvalsFile"]
    one_of = inline["oneOf"]
    assert isinstance(one_of, list)  # a discriminated union: one $ref per kind
    kinds = [str(ref["$ref"]).rsplit("/", 1)[1] for ref in one_of if isinstance(ref, dict)]
    defs["RegistryBenchmark"] = _registry_entry(defs, kinds)
    defs["InlineBenchmark"] = {"title": "InlineBenchmark", **inline}
    defs.pop("BenchmarkEntry", None)
    _node(_node(schema, "properties"), "benchmarks")["items"] = {
        "anyOf": [
            {"type": "string", "description": "A registry benchmark by name."},
            {"$ref": "#/$defs/RegistryBenchmark"},
            {"$ref": "#/$defs/InlineBenchmark"},
        ]
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalgate evals.yaml"
    return schema
