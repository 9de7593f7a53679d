"""Single-turn question answering: template the prompt, ask the model, score the answer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate.suites.base import Item, Outcome, SuiteDefaults
from evalgate.suites.datasets import DataError, load_items
from evalgate.suites.scorers import Scorer, make_scorer
from evalgate.suites.templating import TemplateProblem, compile_template, names_used, render

if TYPE_CHECKING:
    from evalgate.config.spec import ArithBenchmark, FileBenchmark, HFBenchmark
    from evalgate.sandbox import Sandboxes

__all__ = ["QASuite"]


@dataclass
class QASuite(SuiteDefaults):
    name: str
    items: list[Item]
    scorer: Scorer
    messages: dict[str, list[dict[str, str]]]  # item id → chat messages, rendered up front

    @classmethod
    def from_spec(
        cls,
        spec: ArithBenchmark | FileBenchmark | HFBenchmark,
        *,
        sandboxes: Sandboxes | None = None,
    ) -> QASuite:
        try:
            return cls._from_spec(spec)
        except DataError as exc:
            exc.benchmark = spec.name
            raise

    @classmethod
    def _from_spec(cls, spec: ArithBenchmark | FileBenchmark | HFBenchmark) -> QASuite:
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
            template = compile_template(spec.prompt_template)
        except TemplateProblem as exc:
            raise DataError(f"benchmark {spec.name!r}: {exc}", field="prompt_template") from None
        used = names_used(spec.prompt_template)
        if not used:  # every item would be asked the same question
            single = re.search(r"(?<!\{)\{\s*([A-Za-z_]\w*)\s*\}(?!\})", spec.prompt_template)
            hint = (
                f"; {{{single.group(1)}}} in single braces is plain text, write "
                f"{{{{ {single.group(1)} }}}}"
                if single
                else ", e.g. {{ prompt }}"
            )
            raise DataError(
                f"benchmark {spec.name!r}: the template reads no data field, so every item "
                f"gets the same prompt{hint}",
                field="prompt_template",
            )
        leaked = sorted(used & {"answer", getattr(spec, "answer_field", "answer")})
        if leaked:  # every item would pass: the question carries its own answer
            raise DataError(
                f"benchmark {spec.name!r}: the template shows the model the answer "
                f"({', '.join(map(repr, leaked))}); leave it out of prompt_template",
                field="prompt_template",
            )
        messages = {}
        for item in items:
            context = {**item.fields, "prompt": item.prompt, "answer": item.answer, "id": item.id}
            try:
                text = render(template, context)
            except TemplateProblem as exc:
                have = ", ".join(sorted({"prompt", "answer", "id", *map(str, item.fields)}))
                raise DataError(
                    f"benchmark {spec.name!r}: {exc} for item {item.id!r} "
                    f"(names the template can use: {have})",
                    field="prompt_template",
                ) from None
            if not text.strip():  # an empty question is a data mistake, not a hard item
                # arith's prompts are generated: no column, only the template to blame.
                column = getattr(spec, "prompt_field", None)
                blame = f"column {column!r} is empty, or " if column else ""
                raise DataError(
                    f"benchmark {spec.name!r}: the prompt is empty for item {item.id!r} "
                    f"({blame}the template renders nothing)",
                    field="prompt_template",
                )
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
