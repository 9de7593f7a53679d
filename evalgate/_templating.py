"""Prompt templates: Jinja2 in its sandbox (:mod:`evalgate._jinja`), every failure a one-line
message; a template of literal text and ``{{ name }}`` placeholders is read and rendered without
importing Jinja.

A template is config, rendered for every item before the first request (and by `validate`): a
name the data lacks, a filter failing on a value, `1 // 0` or `{% include %}` must each be a
config error naming the item, never a traceback. The sandbox keeps a template from reaching
Python internals (`''.__class__.__mro__`) and caps `range()` (a 10⁸-step loop would hang).

Output is capped at :data:`MAX_CHARS`, and not only at the end: one expression can build
gigabytes (`'a' * 2000000000`, `ns.s ~ ns.s` doubling in a loop, `'x'.ljust(N)`, `2 ** 10**9`),
so repetition, concatenation, `%`-formatting, power and string-method size arguments are checked
before they run, and each render runs with the process's address space capped a fixed amount
above its current size (Linux), so what slips past those checks fails as a MemoryError, which is
the template's config error, never the machine's.
"""

from __future__ import annotations

import contextlib
import keyword
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

__all__ = ["MAX_CHARS", "Template", "TemplateProblem", "compile_template", "names_used", "render"]

MAX_CHARS = 4_000_000  # ~1 M tokens: more than any context window, so a mistake (a loop)
_HEADROOM = 1 << 30  # address space one render may add (Linux); more is a MemoryError


class TemplateProblem(Exception):
    """Why a template could not be compiled or rendered, in one line."""


# (literals, names): the template renders as literals[0] + value of names[0] + literals[1] + …
Plan = tuple[list[str], list[str]]


class Template:
    """A prompt template. ``evalgate_plain``: its :data:`Plan` when rendering it is a
    concatenation, else None; ``jinja``: Jinja's compiled template, compiled on first use (a
    plain template whose values are all text never needs it)."""

    __slots__ = ("_jinja", "evalgate_plain", "text")

    def __init__(self, text: str, plain: Plan | None, jinja: jinja2.Template | None = None):
        self.text = text
        self.evalgate_plain = plain
        self._jinja = jinja

    @property
    def jinja(self) -> jinja2.Template:
        if self._jinja is None:
            self._jinja = _compile(self.text)
        return self._jinja


@contextlib.contextmanager
def _address_space_capped() -> Iterator[None]:
    """The process's address space capped at its size + :data:`_HEADROOM` (Linux), restored
    after: one allocation of gigabytes fails as a MemoryError instead of taking the machine."""
    cap: int | None = None
    try:
        import resource

        with open("/proc/self/statm", "rb") as fh:
            size = int(fh.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + _HEADROOM
        if soft != resource.RLIM_INFINITY and soft <= cap:
            cap = None  # already tighter
        if hard != resource.RLIM_INFINITY and cap is not None and cap > hard:
            cap = None
    except (OSError, ValueError, ImportError):
        cap = None
    if cap is None:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _compile(text: str) -> jinja2.Template:
    import jinja2

    from evalgate._jinja import ENVIRONMENT

    try:
        with _address_space_capped():  # compiling folds constants: it evaluates, too
            return ENVIRONMENT.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(f"template line {exc.lineno}: {exc.message}") from None
    except MemoryError:
        raise TemplateProblem("the template needs more memory than any prompt could") from None


def compile_template(text: str) -> Template:
    """The template, or :class:`TemplateProblem` (one line) when Jinja cannot compile it."""
    plan = _literal_plan(text)
    if plan is not None:  # it compiles (Jinja would read it as the plan says): no Jinja yet
        return Template(text, plan)
    template = Template(text, None, _compile(text))
    template.evalgate_plain = _probed_plan(text, template)
    return template


# `{{ name }}` and nothing else inside the braces: what most prompt templates are made of.
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_LINE_END = re.compile(r"\r\n|\r|\n")  # what Jinja's lexer takes for a line end (newline_re)
# Names that are not a data field: what Jinja's parser reads as a constant or an operator word
# (Python's keywords too, though Jinja takes most as names: left to Jinja, to be sure), and the
# sandbox's globals (`range`: Jinja's function when the data has no such field).
_NOT_DATA = frozenset(keyword.kwlist) | {"true", "false", "none"}
_NOT_DATA |= {"range", "dict", "lipsum", "cycler", "joiner", "namespace"}


def _literal_plan(text: str) -> Plan | None:
    """The plan of a template Jinja (default delimiters, no line statements, the trailing line
    end dropped: :mod:`evalgate._jinja`'s settings) provably reads as literal text and
    ``{{ name }}`` variables only, found without Jinja; None for anything else.

    Jinja's lexer first turns every line end into a newline and drops one at the very end, then
    cuts the text at the first ``{{``, ``{%`` or ``{#``. So a literal between placeholders must
    hold none of those and must not end in ``{`` (``{`` then ``{{`` opens a tag one character
    early); inside ``{{ … }}`` a name token is a variable unless it is a constant (``none``),
    an operator word or one of Jinja's globals (``range``). Each variable renders as ``str`` of
    its value, which for text is the text: the concatenation is Jinja's output, character for
    character."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        del lines[-1]
    pieces = _PLACEHOLDER.split("\n".join(lines))
    literals, names = pieces[0::2], pieces[1::2]
    if any(tag in lit for lit in literals for tag in ("{{", "{%", "{#")):
        return None
    if any(lit.endswith("{") for lit in literals[:-1]) or _NOT_DATA.intersection(names):
        return None
    return literals, names


def _probed_plan(text: str, template: Template) -> Plan | None:
    """(literals, names) when Jinja itself renders a probe (a distinct marker per name) to
    exactly what the concatenation gives, for a template :func:`_literal_plan` left to Jinja;
    None otherwise (a name Jinja reads as a constant, ``none``, anything this parse does not
    foresee sends the template down Jinja's path)."""
    pieces = _PLACEHOLDER.split(text)
    literals, names = pieces[0::2], pieces[1::2]
    if any(tag in lit for lit in literals for tag in ("{{", "{%", "{#")):
        return None
    probe = {name: f"\x00{i}\x00" for i, name in enumerate(dict.fromkeys(names))}
    try:
        expected = _render(template, probe)
    except TemplateProblem:
        return None
    if _concat(literals, [probe[n] for n in names]) != expected:
        # Jinja drops one trailing newline and writes \r\n as \n: the literals as it keeps them
        lines = _LINE_END.split(text)
        if lines[-1] == "":
            del lines[-1]
        pieces = _PLACEHOLDER.split("\n".join(lines))
        literals, names = pieces[0::2], pieces[1::2]
        if _concat(literals, [probe.get(n, "") for n in names]) != expected:
            return None
    return literals, names


def _concat(literals: list[str], values: list[str]) -> str:
    out = [literals[0]]
    for value, literal in zip(values, literals[1:], strict=True):
        out += (value, literal)
    return "".join(out)


def names_used(text: str) -> set[str]:
    """The variables a template reads (``{{ answer }}``, ``{% if hint %}``)."""
    plan = _literal_plan(text)
    if plan is not None:
        return set(plan[1])
    import jinja2
    from jinja2 import meta

    from evalgate._jinja import ENVIRONMENT

    try:
        return set(meta.find_undeclared_variables(ENVIRONMENT.parse(text)))
    except jinja2.TemplateSyntaxError:
        return set()  # compile_template reports it


def render(template: Template, context: Mapping[str, object]) -> str:
    """The rendered text; generated piece by piece so that a loop that would write gigabytes
    stops at :data:`MAX_CHARS` instead of eating the machine."""
    plain = template.evalgate_plain
    if plain is not None:  # literal text and {{ name }}: joined here when every value is text
        literals, names = plain
        if len(names) == 1:  # the common case (`{{ prompt }}`), once per item: no lists
            text = context.get(names[0])
            if type(text) is str:
                if len(text) + len(literals[0]) + len(literals[1]) > MAX_CHARS:
                    raise TemplateProblem(
                        f"the template renders more than {MAX_CHARS:,} characters (a huge value?)"
                    )
                return literals[0] + text + literals[1]
        values = [context.get(name) for name in names]
        texts = [v for v in values if type(v) is str]
        if len(texts) == len(values):
            if sum(map(len, texts)) + sum(map(len, literals)) > MAX_CHARS:
                raise TemplateProblem(
                    f"the template renders more than {MAX_CHARS:,} characters (a huge value?)"
                )
            return _concat(literals, texts)
    try:
        with _address_space_capped():
            return _render(template, context)
    except MemoryError:
        raise TemplateProblem(
            "the template needs more memory than any prompt could (a huge value?)"
        ) from None


def _render(template: Template, context: Mapping[str, object]) -> str:
    import jinja2

    compiled = template.jinja
    parts, size = [], 0
    try:
        for part in compiled.generate(context):
            size += len(part)
            if size > MAX_CHARS:
                raise TemplateProblem(
                    f"the template renders more than {MAX_CHARS:,} characters (a loop?)"
                )
            parts.append(part)
        return "".join(parts)
    except (TemplateProblem, MemoryError):
        raise
    except jinja2.TemplateError as exc:  # undefined name, unsafe attribute, no loader
        raise TemplateProblem(str(exc.message or type(exc).__name__)) from None
    except Exception as exc:  # a template computes with the data: any error is the template's
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise TemplateProblem(
            f"the template failed ({type(exc).__name__}{': ' + first if first else ''})"
        ) from None
