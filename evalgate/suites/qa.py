"""Single-turn question answering: template the prompt, ask the model, score the answer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalgate._templating import TemplateProblem, compile_template, names_used, render
from evalgate.score.scorers import Scorer, make_scorer
from evalgate.suites.base import Item, Outcome, SuiteDefaults
from evalgate.suites.datasets import DataError, load_items

if TYPE_CHECKING:  # the judge loads with a judged benchmark only (start-up: tests/test_startup.py)
    from evalgate.config.spec import ArithBenchmark, FileBenchmark, HFBenchmark, JudgeScorer
    from evalgate.sandbox import Sandboxes
    from evalgate.score.base import JudgeRecord
    from evalgate.score.judge import Judge, JudgeContext
    from evalgate.serve.client import ChatClient

__all__ = ["QASuite"]


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(eq=False)
class QASuite(SuiteDefaults):
    name: str
    items: list[Item]
    scorer: Scorer
    messages: dict[str, list[dict[str, str]]]  # item id → chat messages, rendered up front
    judge: Judge | None = None  # a model-graded scorer; the run binds its client

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
        if spec.scorer.type == "judge":
            judge = _make_judge(spec.name, spec.scorer, items, messages)
            return cls(name=spec.name, items=items, scorer=_unused, messages=messages, judge=judge)
        return cls(name=spec.name, items=items, scorer=make_scorer(spec.scorer), messages=messages)

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        prompt = self.messages[item.id]
        reply = await client.chat(prompt, rollout=index)
        if self.judge is not None:
            context = _judge_context(self.judge, item, prompt, reply.text)
            metric = "win_rate" if self.judge.spec.mode == "pairwise" else "accuracy"
            from evalgate.score.base import JudgeFailed  # loaded already: the judge's module

            try:
                if metric == "accuracy":
                    judgement = await self.judge.grade(context, usage=reply.usage)
                else:
                    judgement = await _grade_pair(self.judge, item, index, context, reply.usage)
            except JudgeFailed as exc:
                exc.partial["prompt"] = prompt  # the record keeps what was asked, too
                raise
            return Outcome.of_reply(
                prompt, reply, judgement["score"], metric=metric, judge=judgement
            )
        return Outcome.of_reply(prompt, reply, self.scorer(reply.text, item.answer))


async def _grade_pair(
    judge: Judge, item: Item, index: int, context: JudgeContext, usage: dict[str, int]
) -> JudgeRecord:
    """Pairwise: against the baseline's completion of the same item (its rollout ``index``, or
    its first when it ran fewer). With none — the baseline's own run, an item the baseline
    lacks — the score is 0.5: a completion ties with itself, so the base run scores 0.5 on
    every item and the gate's paired difference is the PR's preference minus one half."""
    base = (judge.baseline or {}).get(item.id)
    if not base:
        why = "no baseline run" if judge.baseline is None else "the baseline lacks this item"
        return {"score": 0.5, "note": f"{why}: a tie with itself by construction", "samples": []}
    return await judge.grade_pair(context, base[min(index, len(base) - 1)], usage=usage)


def _unused(completion: str, answer: str) -> float:
    raise AssertionError("a judged benchmark is scored by its judge")


def _judge_context(
    judge: Judge, item: Item, prompt: list[dict[str, str]], completion: str
) -> JudgeContext:
    return judge.context(
        question=prompt[-1]["content"],
        completion=completion,
        reference=item.answer,
        item_id=item.id,
        fields=item.fields,
    )


def _make_judge(
    name: str, scorer: JudgeScorer, items: list[Item], messages: dict[str, list[dict[str, str]]]
) -> Judge:
    """The benchmark's judge, its template rendered for every item before any model call (with
    a stand-in completion), as the prompt template is: a mistake is a config error up front."""
    from evalgate.score.judge import Judge
    from evalgate.score.verdict import asks_for_verdict

    try:
        judge = Judge.from_spec(scorer)
    except TemplateProblem as exc:
        raise DataError(
            f"benchmark {name!r}: judge template: {exc}", field="scorer.prompt_template"
        ) from None
    asked = False  # does the rendered prompt (or the system prompt) ask for a verdict?
    for item in items:
        if scorer.mode == "reference" and not item.answer.strip():
            raise DataError(
                f"benchmark {name!r}: item {item.id!r} has no reference answer, which a "
                "`mode: reference` judge compares with (use `mode: rubric`)",
                field="scorer.mode",
            )
        try:
            context = _judge_context(judge, item, messages[item.id], "(completion)")
            sent = judge.messages({**context, "completion_a": "(a)", "completion_b": "(b)"})
        except TemplateProblem as exc:
            raise DataError(
                f"benchmark {name!r}: judge template: {exc} for item {item.id!r}",
                field="scorer.prompt_template",
            ) from None
        asked = asked or asks_for_verdict(sent)
    if items and not asked:  # every call would be paid for and none could be read
        want = "A|B|TIE" if scorer.mode == "pairwise" else "PASS|FAIL|<number>"
        raise DataError(
            f"benchmark {name!r}: the judge template never asks for a verdict: the judge's "
            f"reply is read from a final line `VERDICT: {want}`, so the prompt must ask for it",
            field="scorer.prompt_template",
        )
    return judge
