"""A prompt template that is literal text and ``{{ name }}`` placeholders is rendered by joining
strings (the per-item path of a 2,000-item run's start-up), and renders exactly what Jinja
renders; anything else goes through Jinja, caps and errors included."""

from __future__ import annotations

from typing import Any

import pytest

from evalgate import _templating as templating
from evalgate._templating import TemplateProblem, compile_template, render

TEMPLATES = [
    "What is {{ prompt }}?",
    "{{ prompt }}",
    "{{prompt}}",
    "Q: {{ prompt }}\n",
    "Q: {{ prompt }}\n\n",
    "a\r\nb {{ prompt }}\r\nc\rd",
    "{{ prompt }} and {{ prompt }}, then {{ id }}",
    "}} {{ prompt }} }",
    "{{ none }} {{ prompt }}",
    "{{ True }}{{ prompt }}",
    "{{- prompt }} x",
    "{{ prompt|upper }}",
    "{{ prompt }}{# note #}",
    "{% if prompt %}{{ prompt }}{% endif %}",
    "{{ missing }} {{ prompt }}",
    "{{ prompt.upper() }}",
]
CONTEXTS: list[dict[str, Any]] = [
    {"prompt": "3 + 4", "id": "a1"},
    {"prompt": "", "id": ""},
    {"prompt": "multi\nline\r\n{{ not a tag }}", "id": "x"},
    {"prompt": 12, "id": None},
    {"prompt": ["a", 1], "id": {"k": 1}},
]


def _jinja(template: Any, context: dict[str, Any]) -> str:
    return templating._render(template, context)  # Jinja's own path, no shortcut


@pytest.mark.parametrize("text", TEMPLATES)
def test_a_template_renders_what_jinja_renders(text: str) -> None:
    template = compile_template(text)
    for context in CONTEXTS:
        try:
            expected = _jinja(template, context)
        except TemplateProblem as exc:
            with pytest.raises(TemplateProblem) as caught:
                render(template, context)
            assert str(caught.value) == str(exc)
            continue
        assert render(template, context) == expected, (text, context)


def test_the_common_templates_take_the_joining_path() -> None:
    for text in ("What is {{ prompt }}?", "{{ prompt }}", "Q: {{ question }}\nA:"):
        assert compile_template(text).evalgate_plain is not None, text  # type: ignore[attr-defined]
    for text in ("{{ prompt|upper }}", "{% if a %}{{ a }}{% endif %}", "{{ none }}"):
        assert compile_template(text).evalgate_plain is None, text  # type: ignore[attr-defined]


def test_the_size_cap_holds_on_the_joining_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templating, "MAX_CHARS", 100)
    template = compile_template("Say {{ prompt }}")
    assert render(template, {"prompt": "a" * 90}) == "Say " + "a" * 90
    with pytest.raises(TemplateProblem, match="more than 100 characters"):
        render(template, {"prompt": "a" * 97})
