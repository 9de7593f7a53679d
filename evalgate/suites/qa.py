"""Single-turn question answering: template the prompt, ask the model, score the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from evalgate.suites.base import Item, Outcome, SuiteDefaults
from evalgate.suites.datasets import DataError, load_items
from evalgate.suites.scorers import Scorer, make_scorer

__all__ = ["QASuite"]

# StrictUndefined: a template naming a column the data lacks fails before any model call.
_JINJA = jinja2.Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
)


@dataclass
class QASuite(SuiteDefaults):
    name: str
    items: list[Item]
    scorer: Scorer
    messages: dict[str, list[dict[str, str]]]  # item id → chat messages, rendered up front

    @classmethod
    def from_spec(cls, spec: Any, *, sandboxes: Any = None) -> QASuite:
        try:
            return cls._from_spec(spec)
        except DataError as exc:
            exc.benchmark = spec.name
            raise

    @classmethod
    def _from_spec(cls, spec: Any) -> QASuite:
        items = load_items(spec)
        wanted = spec.eval.num_examples
        if wanted is not None and wanted > len(items):
            # A promise of more items than exist must not shrink silently to what there is.
            raise DataError(
                f"{wanted} items asked for, but benchmark {spec.name!r} has {len(items)}; "
                f"set eval.num_examples to at most {len(items)}, or null for all",
                field="eval.num_examples",
            )
        if wanted is not None:
            items = items[:wanted]
        try:
            template = _JINJA.from_string(spec.prompt_template)
        except jinja2.TemplateSyntaxError as exc:
            raise DataError(
                f"benchmark {spec.name!r}: template line {exc.lineno}: {exc.message}",
                field="prompt_template",
            ) from None
        messages = {}
        for item in items:
            try:
                text = template.render(
                    {**item.fields, "prompt": item.prompt, "answer": item.answer, "id": item.id}
                )
            except jinja2.TemplateError as exc:  # undefined name, a filter failing on a value
                have = ", ".join(sorted({"prompt", "answer", "id", *map(str, item.fields)}))
                raise DataError(
                    f"benchmark {spec.name!r}: {exc.message} for item {item.id!r} "
                    f"(names the template can use: {have})",
                    field="prompt_template",
                ) from None
            msgs = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
            messages[item.id] = [*msgs, {"role": "user", "content": text}]
        return cls(name=spec.name, items=items, scorer=make_scorer(spec.scorer), messages=messages)

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        prompt = self.messages[item.id]
        reply = await client.chat(prompt, rollout=index)
        reward = self.scorer(reply.text, item.answer)
        return Outcome(
            prompt=prompt,
            completion=reply.text,
            reward=reward,
            metrics={"accuracy": reward},
            usage=reply.usage,
        )
