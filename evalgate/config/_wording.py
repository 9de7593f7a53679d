"""Error wording for evals.yaml: spec patterns said in words, values shortened, hints for what
YAML read otherwise than meant. Pure text; :mod:`evalgate.config.load` builds the messages."""

from __future__ import annotations

import re

from evalgate.config.spec._base import URL_NO_USERINFO

__all__ = ["PATTERNS", "mapping_words", "shown", "typing_hint"]

# Patterns in the spec, said in words: a raw regular expression is no help to a user.
PATTERNS = {
    r"^https?://": "must be a URL starting with http:// or https://, e.g. http://127.0.0.1:8000/v1",
    URL_NO_USERINFO: "must be a URL starting with http:// or https://, e.g. http://127.0.0.1:8000/v1",
    r"^[A-Za-z0-9][A-Za-z0-9._-]*$": "must be a label of letters, digits, '.', '_' or '-' "
    "(no spaces or slashes), starting with a letter or digit",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "must be the NAME of an environment variable (letters, digits, "
    "_), e.g. OPENAI_API_KEY; the key itself goes in that variable, never in the file",
    r"^(none|local:.+|git-branch(:[A-Za-z0-9._/-]+)?)$": "must be git-branch, git-branch:BRANCH, "
    "local:PATH or none",
    r"^[A-Z]+$": "must be capital letters, e.g. ABCD",
    r"^[A-Za-z0-9-]+(:[1-9][0-9]*)?$": "must be TYPE or TYPE:COUNT, e.g. H100:1",
    r"^[a-z0-9][a-z0-9-]*$": "must be lower-case letters, digits and '-'",
    r"^\S+$": "must be one word, without spaces (a model id such as org/model-name)",
    r"^[A-Za-z0-9._-]{1,64}$": "must be the name of a Modal Secret (letters, digits, '.', '_' "
    "or '-', at most 64)",
    r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$": "must be ORG/NAME, e.g. "
    "my-org/evalgate-runs",
}
_SHOWN = 120  # characters of a value quoted in an error: a pasted 100 KB string stays one line
_MAPPING = re.compile(
    r"must be a valid dictionary( or (instance of \w+|object to extract fields from))?"
)


def shown(node: object) -> str:
    text = type(node).__name__ if isinstance(node, dict | list) else repr(node)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}… ({len(text):,} characters)"


def mapping_words(msg: str, example: str = "") -> str:
    """pydantic names Python classes ("instance of SandboxSpec"): say it in YAML's terms."""
    return _MAPPING.sub(f"must be a mapping of fields{example}", msg)


_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def typing_hint(kind: str, node: object) -> str:
    """What the user probably meant, for values YAML read otherwise than intended."""
    if isinstance(node, bool) and kind == "string_type":
        return "; YAML reads yes/no/on/off as true/false: quote it"
    if not isinstance(node, str):
        return ""
    if kind in {"model_type", "model_attributes_type", "dict_type"} and re.match(r"^\w+:\S", node):
        key, _, value = node.partition(":")
        return f"; a key needs a space after its colon: `{key}: {value}`"
    if kind == "float_parsing" and (percent := _PERCENT.match(node)):
        return f"; write {float(percent.group(1)) / 100:g}"
    if kind == "int_parsing":
        try:
            number = float(node)
        except ValueError:
            return ""
        if number.is_integer() and abs(number) < 1e18:
            return f"; write {int(number)}"
    return ""
