"""Prompt templates: Jinja2 in its sandbox, every failure a one-line message.

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
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import jinja2
from jinja2.compiler import CodeGenerator
from jinja2.runtime import str_join
from jinja2.sandbox import SandboxedEnvironment

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.compiler import Frame
    from jinja2.runtime import Context

__all__ = ["MAX_CHARS", "TemplateProblem", "compile_template", "names_used", "render"]

MAX_CHARS = 4_000_000  # ~1 M tokens: more than any context window, so a mistake (a loop)
_MAX_BITS = 8 * MAX_CHARS  # a number no template needs more of
_HEADROOM = 1 << 30  # address space one render may add (Linux); more is a MemoryError
_WIDE = re.compile(r"\d{8,}")  # a width or precision of ≥ 10⁷ in a format string


class TemplateProblem(Exception):
    """Why a template could not be compiled or rendered, in one line."""


def _too_big(what: str) -> TemplateProblem:
    return TemplateProblem(f"the template renders more than {MAX_CHARS:,} characters ({what})")


def _size(value: object) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


class _Generator(CodeGenerator):
    """Jinja's code generator, with ``~`` (concatenation) through a size check."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.capped_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Environment(SandboxedEnvironment):
    code_generator_class = _Generator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    @staticmethod
    def capped_join(parts: Iterable[object]) -> str:
        texts = [str(p) for p in parts]
        if sum(map(len, texts)) > MAX_CHARS:
            raise _too_big("a ~ concatenation")
        return str_join(texts)

    def call_binop(self, context: Context, operator: str, left: object, right: object) -> object:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                size = _size(seq)
                if size is not None and isinstance(n, int) and size * n > MAX_CHARS:
                    raise _too_big("a * repetition")
        elif operator == "+":
            a, b = _size(left), _size(right)
            if a is not None and b is not None and a + b > MAX_CHARS:
                raise _too_big("a + concatenation")
        elif operator == "**":
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and abs(left) > 1
                and right * math.log2(abs(left)) > _MAX_BITS
            ):
                raise TemplateProblem("the template computes a number too large to print")
        elif operator == "%" and isinstance(left, str):
            args = right if isinstance(right, tuple) else (right,)
            if _WIDE.search(left) or any(type(a) is int and a > MAX_CHARS for a in args):
                raise _too_big("a % format width")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: object, *args: object, **kwargs: object) -> object:
        # 'x'.ljust(N), .center, .zfill, .expandtabs, '{:>N}'.format(…), .replace(…, big)
        # (str.format comes wrapped by the sandbox: the bound method is its __wrapped__)
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(owner, str | bytes | list):
            values = [*args, *kwargs.values()]
            if any(type(v) is int and v > MAX_CHARS for v in values):
                raise _too_big("a size argument")
            if any(isinstance(v, str) and _WIDE.search(v) for v in [owner, *values]):
                raise _too_big("a format width")
        return super().call(__context, __obj, *args, **kwargs)


def _capped_filter(name: str, fn: Callable[..., object]) -> Callable[..., object]:
    """``fn`` with its parameters (not the value it filters) checked: no size over the cap."""
    import functools

    @functools.wraps(fn)
    def capped(*args: object, **kwargs: object) -> object:
        if any(type(v) is int and v > MAX_CHARS for v in [*args[1:], *kwargs.values()]):
            raise _too_big(f"a size argument to |{name}")
        return fn(*args, **kwargs)

    return capped


# StrictUndefined: a template naming a column the data lacks fails before any model call.
_JINJA = _Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
)
_JINJA.filters = {name: _capped_filter(name, fn) for name, fn in _JINJA.filters.items()}


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


def compile_template(text: str) -> jinja2.Template:
    try:
        with _address_space_capped():  # compiling folds constants: it evaluates, too
            template = _JINJA.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(f"template line {exc.lineno}: {exc.message}") from None
    except MemoryError:
        raise TemplateProblem("the template needs more memory than any prompt could") from None
    template.evalgate_plain = _plain(text, template)  # type: ignore[attr-defined]
    return template


# `{{ name }}` and nothing else inside the braces: what most prompt templates are made of.
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _plain(text: str, template: jinja2.Template) -> tuple[list[str], list[str]] | None:
    """(literals, names) when the template is literal text and ``{{ name }}`` placeholders only
    (``What is {{ prompt }}?``), so that rendering it is a concatenation; None otherwise.

    Rendering 2,000 items through Jinja costs more than the rest of a run's start-up. The plan
    is kept only if Jinja itself renders a probe (a distinct marker per name) to exactly what the
    concatenation gives: newline handling, a name Jinja reads as a constant (``none``), anything
    this parse does not foresee sends the template down Jinja's path instead."""
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
        lines = re.split(r"(\r\n|\r|\n)", text)[0::2]
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
    from jinja2 import meta

    try:
        return set(meta.find_undeclared_variables(_JINJA.parse(text)))
    except jinja2.TemplateSyntaxError:
        return set()  # compile_template reports it


def render(template: jinja2.Template, context: Mapping[str, object]) -> str:
    """The rendered text; generated piece by piece so that a loop that would write gigabytes
    stops at :data:`MAX_CHARS` instead of eating the machine."""
    plain = getattr(template, "evalgate_plain", None)
    if plain is not None:  # literal text and {{ name }}: joined here when every value is text
        literals, names = plain
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


def _render(template: jinja2.Template, context: Mapping[str, object]) -> str:
    parts, size = [], 0
    try:
        for part in template.generate(context):
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
