"""Jinja2 in its sandbox, with every size checked: the environment behind
:mod:`evalgate._templating`, imported only when a template needs Jinja (a prompt made of literal
text and ``{{ name }}`` placeholders never does: importing Jinja is ~20 ms of a run's start-up).

Output is capped at :data:`evalgate._templating.MAX_CHARS`, and not only at the end: one
expression can build gigabytes (`'a' * 2000000000`, `ns.s ~ ns.s` doubling in a loop,
`'x'.ljust(N)`, `2 ** 10**9`), so repetition, concatenation, `%`-formatting, power and
string-method size arguments are checked before they run. The sandbox keeps a template from
reaching Python internals (`''.__class__.__mro__`) and caps `range()`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import jinja2
from jinja2.compiler import CodeGenerator
from jinja2.runtime import str_join
from jinja2.sandbox import SandboxedEnvironment

from evalgate import _templating as limits  # MAX_CHARS read at each check (tests lower it)
from evalgate._templating import TemplateProblem

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.compiler import Frame
    from jinja2.runtime import Context

__all__ = ["ENVIRONMENT", "too_big"]

_WIDE = re.compile(r"\d{8,}")  # a width or precision of ≥ 10⁷ in a format string


def too_big(what: str) -> TemplateProblem:
    return TemplateProblem(
        f"the template renders more than {limits.MAX_CHARS:,} characters ({what})"
    )


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
        if sum(map(len, texts)) > limits.MAX_CHARS:
            raise too_big("a ~ concatenation")
        return str_join(texts)

    def call_binop(self, context: Context, operator: str, left: object, right: object) -> object:
        cap = limits.MAX_CHARS
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                size = _size(seq)
                if size is not None and isinstance(n, int) and size * n > cap:
                    raise too_big("a * repetition")
        elif operator == "+":
            a, b = _size(left), _size(right)
            if a is not None and b is not None and a + b > cap:
                raise too_big("a + concatenation")
        elif operator == "**":
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and abs(left) > 1
                and right * math.log2(abs(left)) > 8 * cap  # more bits than a prompt's chars
            ):
                raise TemplateProblem("the template computes a number too large to print")
        elif operator == "%" and isinstance(left, str):
            args = right if isinstance(right, tuple) else (right,)
            if _WIDE.search(left) or any(type(a) is int and a > cap for a in args):
                raise too_big("a % format width")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: object, *args: object, **kwargs: object) -> object:
        # 'x'.ljust(N), .center, .zfill, .expandtabs, '{:>N}'.format(…), .replace(…, big)
        # (str.format comes wrapped by the sandbox: the bound method is its __wrapped__)
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(owner, str | bytes | list):
            values = [*args, *kwargs.values()]
            if any(type(v) is int and v > limits.MAX_CHARS for v in values):
                raise too_big("a size argument")
            if any(isinstance(v, str) and _WIDE.search(v) for v in [owner, *values]):
                raise too_big("a format width")
        return super().call(__context, __obj, *args, **kwargs)


def _capped_filter(name: str, fn: Callable[..., object]) -> Callable[..., object]:
    """``fn`` with its parameters (not the value it filters) checked: no size over the cap."""

    @functools.wraps(fn)
    def capped(*args: object, **kwargs: object) -> object:
        if any(type(v) is int and v > limits.MAX_CHARS for v in [*args[1:], *kwargs.values()]):
            raise too_big(f"a size argument to |{name}")
        return fn(*args, **kwargs)

    return capped


# StrictUndefined: a template naming a column the data lacks fails before any model call.
ENVIRONMENT = _Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
)
ENVIRONMENT.filters = {name: _capped_filter(name, fn) for name, fn in ENVIRONMENT.filters.items()}
