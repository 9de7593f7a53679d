"""A prompt template that is literal text and ``{{ name }}`` placeholders is rendered by joining
strings (the per-item path of a 2,000-item run's start-up), and renders exactly what Jinja
renders; anything else goes through Jinja, caps and errors included."""

from __future__ import annotations

from typing import Any

import pytest

from evalgate import _templating as templating
from evalgate._templating import TemplateProblem, compile_template, render
from tests.conftest import python_child

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
    # where a brace, a line end or a word could make Jinja read it otherwise
    "{{{ prompt }}}",
    "{ {{ prompt }}",
    "{{ prompt }}{",
    "{{ prompt }}}}{{ id }}",
    "{{\nprompt\r\n}} x\r\n",
    "\t{{\tprompt\t}}\n\n\n",
    "{{ if }} {{ prompt }}",
    "{{ in }}{{ prompt }}",
    "{{ range }} {{ prompt }}",
    "{{ prompt }} {#",
    "{{ prompt }} {%",
    "",
    "\r",
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
    try:
        template = compile_template(text)
    except TemplateProblem:  # only where Jinja cannot compile it either
        import jinja2

        from evalgate._jinja import ENVIRONMENT

        with pytest.raises(jinja2.TemplateSyntaxError):
            ENVIRONMENT.from_string(text)
        return
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


def _fuzzed(count: int) -> list[str]:
    """Templates of braces, line ends, tag characters and names, in every mix: where Jinja's
    reading of a template could differ from a plain one's."""
    import random

    atoms = ["{", "}", "{{", "}}", " ", "\n", "\r\n", "\r", "%", "#", "-", "a", "prompt", "id"]
    atoms += ["none", "if", "{{ prompt }}", "{{id}}", "{{ prompt -}}", "{%- if id %}"]
    rng = random.Random(36)
    return ["".join(rng.choices(atoms, k=rng.randint(1, 9))) for _ in range(count)]


def test_a_template_read_without_jinja_is_what_jinja_renders() -> None:
    """Every template taken as literal text and placeholders without Jinja compiles in Jinja,
    reads the same names, and renders to the same text, character for character."""
    from jinja2 import meta

    from evalgate._jinja import ENVIRONMENT

    plain = 0
    for text in [*TEMPLATES, *_fuzzed(600)]:
        plan = templating._literal_plan(text)
        if plan is None:
            continue
        plain += 1
        jinja = ENVIRONMENT.from_string(text)
        names = set(meta.find_undeclared_variables(ENVIRONMENT.parse(text)))
        assert set(plan[1]) == names == templating.names_used(text), text
        for given in CONTEXTS[:3]:  # text values; any other name gets text too
            context = {**dict.fromkeys(plan[1], "v {{ w }}\r\n"), **given}
            expected = jinja.render(context)
            assert templating._concat(plan[0], [context[n] for n in plan[1]]) == expected, text
            assert render(compile_template(text), context) == expected, text
    assert plain > 100  # the fuzzing reached the shortcut


def test_every_name_jinja_gives_a_value_of_its_own_is_left_to_jinja() -> None:
    from evalgate._jinja import ENVIRONMENT

    assert set(ENVIRONMENT.globals) <= templating._NOT_DATA


def test_a_plain_template_is_read_and_rendered_without_importing_jinja() -> None:
    """Jinja's import is ~20 ms of a run's start-up: a suite whose template is text and
    ``{{ name }}`` (the default, ``{{ prompt }}``) builds its prompts without it; one that uses
    Jinja's language loads it."""
    child = """
import sys
from evalgate._templating import compile_template, names_used, render
t = compile_template(sys.argv[1])
assert names_used(sys.argv[1]) == {"prompt"}
assert render(t, {"prompt": "2 + 2"}) == "Q: 2 + 2"
print("jinja2" in sys.modules)
"""
    for text, jinja in (("Q: {{ prompt }}", False), ("Q: {{ prompt|trim }}", True)):
        proc = python_child(child, text)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip() == str(jinja), text


def test_the_size_cap_holds_on_the_joining_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templating, "MAX_CHARS", 100)
    template = compile_template("Say {{ prompt }}")
    assert render(template, {"prompt": "a" * 90}) == "Say " + "a" * 90
    with pytest.raises(TemplateProblem, match="more than 100 characters"):
        render(template, {"prompt": "a" * 97})
