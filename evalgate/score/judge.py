"""The model-graded scorer at run time: render the judge's prompt, ask it k times, parse verdicts.

The judge is a model on its own endpoint (served like the models under test), reached through
the run's :class:`~evalgate.serve.client.ChatClient`: retries, the concurrency limit and the
response cache apply to its calls as to the candidate's. The request body holds the judge's
model, sampling and the rendered prompt (item and completion), so the cache key is (judge, item,
completion, sample): a baseline's judgements are reused, and a re-run costs nothing.

A judge that fails (HTTP, timeout) or answers without a verdict this module can read raises
:class:`JudgeFailed`: the rollout is an error of kind ``judge_*`` with the raw replies kept in
results.jsonl, counted against ``eval.max_error_rate`` — never a silent 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evalgate._templating import Template, TemplateProblem, compile_template, render
from evalgate.config.spec.judge import JudgeScale, JudgeScorer
from evalgate.score._prompts import DEFAULT_TEMPLATES, fenced
from evalgate.score.base import (
    JudgeBase,
    JudgeFailed,
    JudgeRecord,
    JudgeSample,
    failure,
    no_usage,
)
from evalgate.score.verdict import Scale, Verdict, parse_reply, verdict_schema

if TYPE_CHECKING:
    from evalgate.score.labels import LabelledExample

__all__ = ["JUDGE_PROTOCOL", "Judge", "JudgeContext"]

# The version of what a judge's score means beyond its config: the default templates and the
# verdict parsing. In the fingerprint (run/fingerprint.py), so a baseline judged under another
# version is not compared with a PR judged under this one. 2: fenced, capped completions; one
# final verdict line; a reply cut off has none; structured verdicts (`verdict_format`).
JUDGE_PROTOCOL = 2


# Backends whose servers constrain the reply to a JSON schema given as `response_format`:
# llama.cpp (the embedded model: schema → grammar) and vLLM (guided decoding).
_CONSTRAINED = frozenset({"local", "vllm", "modal-vllm"})

# What the judge's template sees (docs: `scorer.prompt_template`): the question, completion,
# reference, rubric, scale, id and the item's fields; pairwise adds ``completion_a`` and
# ``completion_b``. A template may read any of them: a mapping of names to values.
JudgeContext = dict[str, object]


@dataclass
class Judge(JudgeBase[JudgeScorer]):
    """A compiled judge for one benchmark: it renders the prompt, asks k times, reads the
    verdicts. ``labels``: its labelled set, loaded by the run; ``baseline``: pairwise, the
    baseline's completions, item id → by rollout, set by the run (None: none)."""

    template: Template = field(kw_only=True)  # the compiled prompt template
    labels: list[LabelledExample] | None = None
    baseline: dict[str, list[str]] | None = None

    @classmethod
    def from_spec(cls, spec: JudgeScorer) -> Judge:
        """Raises :class:`TemplateProblem` for a template that does not compile."""
        text = spec.prompt_template or DEFAULT_TEMPLATES[spec.mode]
        return cls(spec=spec, template=compile_template(text))

    def response_format(self, scale: Scale | None = None) -> dict[str, object] | None:
        """The ``response_format`` asking for a structured verdict on ``scale`` (default: the
        spec's; pairwise: A/B/TIE), or None when the verdict is read from text only."""
        fmt = self.spec.verdict_format
        if fmt == "auto":
            fmt = "json" if self.spec.model.backend in _CONSTRAINED else "text"
        if fmt != "json":
            return None
        if scale is None:
            scale = "pairwise" if self.spec.mode == "pairwise" else self.spec.scale
        # About 3 characters a token, leaving ~32 tokens for the JSON and the verdict.
        chars = max(16, 3 * (self.spec.sampling.max_tokens - 32))
        schema = {"name": "verdict", "strict": True, "schema": verdict_schema(scale, chars)}
        return {"type": "json_schema", "json_schema": schema}

    def context(
        self,
        *,
        question: str,
        completion: str,
        reference: str,
        item_id: str,
        fields: Mapping[str, object] | None,
    ) -> JudgeContext:
        scale = self.spec.scale
        return {
            "question": question,
            "completion": completion,
            "reference": reference,
            "rubric": self.spec.rubric,
            "scale_min": scale.min if isinstance(scale, JudgeScale) else None,
            "scale_max": scale.max if isinstance(scale, JudgeScale) else None,
            "id": item_id,
            "item": dict(fields or {}),
        }

    def messages(self, context: JudgeContext) -> list[dict[str, str]]:
        """The judge's chat messages; raises TemplateProblem (a config error) on a failure.
        The completions are shown capped (:func:`shown`) and fenced by ``boundary``."""
        text = render(self.template, fenced(context))
        system = self.spec.system_prompt
        return [
            *([{"role": "system", "content": system}] if system else []),
            {"role": "user", "content": text},
        ]

    async def grade(self, context: JudgeContext, *, usage: dict[str, int]) -> JudgeRecord:
        """The judgement record (score = mean of k samples, each sample's reply and reasoning,
        the judge's usage and cost). ``usage``: the candidate's, kept on failure.
        Raises :class:`JudgeFailed`."""
        assert self.client is not None, "the run binds the judge's client first"
        messages = self._rendered(context, usage)
        samples: list[JudgeSample] = []
        judge_usage = no_usage()
        await self._ask(messages, self.spec.scale, context, usage, samples, judge_usage)
        scores = [_score(s) for s in samples]
        return {
            "score": sum(scores) / len(scores),
            "samples": samples,
            "usage": judge_usage,
            "cost_usd": self.cost(judge_usage),
        }

    async def grade_pair(
        self, context: JudgeContext, base: str, *, usage: dict[str, int]
    ) -> JudgeRecord:
        """Pairwise: the PR's completion (``context["completion"]``) against the baseline's
        (``base``), shown in both orders, k samples each. ``score``: how much the judge prefers
        the PR's, averaged over orders and samples (1 better, 0.5 tie, 0 worse), so a judge
        that always picks the first response scores a tie, not a win. ``consistent``: the two
        orders gave the same preference (position-swap consistency)."""
        assert self.client is not None, "the run binds the judge's client first"
        pr = _completion(context)
        if pr == base:  # the same text ties with itself: no judge is asked (nor paid)
            note = "the same completion as the baseline's: a tie by construction"
            return {"score": 0.5, "note": note, "samples": []}  # not a test of position bias
        orders = (("base-first", base, pr, False), ("pr-first", pr, base, True))
        judge_usage = no_usage()
        samples: list[JudgeSample] = []
        prefs = []
        for name, a, b, pr_is_a in orders:
            messages = self._rendered({**context, "completion_a": a, "completion_b": b}, usage)
            got: list[JudgeSample] = []
            await self._ask(messages, "pairwise", context, usage, got, judge_usage, samples)
            for sample in got:  # prefer-A → prefer-PR
                sample["order"] = name
                sample["score"] = _score(sample) if pr_is_a else 1.0 - _score(sample)
            samples.extend(got)
            prefs.append(sum(_score(s) for s in got) / len(got))
        return {
            "score": sum(prefs) / len(prefs),
            "orders": {name: p for (name, *_), p in zip(orders, prefs, strict=True)},
            "consistent": prefs[0] == prefs[1],
            # For the PASS decision the pair counts as its worse order for the PR: two orders
            # that disagree are no evidence of a tie (compare/position.py).
            "worse_order": min(prefs),
            "samples": samples,
            "usage": judge_usage,
            "cost_usd": self.cost(judge_usage),
        }

    def _rendered(self, context: JudgeContext, usage: dict[str, int]) -> list[dict[str, str]]:
        """:meth:`messages`, a template that fails on this item being the rollout's error
        (``judge_template``, the candidate's completion and usage kept)."""
        try:
            return self.messages(context)
        except TemplateProblem as exc:
            partial: dict[str, object] = {"completion": _completion(context), "usage": usage}
            raise JudgeFailed("judge_template", str(exc), partial) from None

    async def _ask(
        self,
        messages: list[dict[str, str]],
        scale: Scale,
        context: JudgeContext,
        usage: dict[str, int],
        samples: list[JudgeSample],
        judge_usage: dict[str, int],
        earlier: list[JudgeSample] | None = None,
    ) -> None:
        """k judgements of ``messages`` appended to ``samples``; raises JudgeFailed (with
        ``earlier`` samples, ``samples`` and the usage so far kept)."""

        from evalgate.serve.client import RequestFailed  # the run has loaded it already

        response_format = self.response_format(scale)
        structured = response_format is not None

        def readable(text: str) -> bool:  # an unparseable reply is not cached: a re-run asks again
            return parse_reply(text, scale, structured=structured).score is not None

        def failed(kind: str, detail: str) -> JudgeFailed:
            kept = [*(earlier or []), *samples]
            judge: JudgeRecord = {
                "samples": kept,
                "usage": judge_usage,
                "cost_usd": self.cost(judge_usage),
            }
            partial: dict[str, object] = {
                "completion": _completion(context),
                "usage": usage,
                "judge": judge,
            }
            return JudgeFailed(kind, detail, partial)

        for s in range(self.spec.judge_samples):
            try:
                reply = await self.ask(
                    messages,
                    rollout=s,
                    usage=judge_usage,
                    keep=readable,
                    complete_only=True,
                    response_format=response_format,
                )
            except RequestFailed as exc:
                kind, detail = failure(exc)
                raise failed(f"judge_{kind}", detail) from exc
            verdict = parse_reply(reply.text, scale, structured=structured)
            if reply.finish_reason == "length":  # its last line may be anything it was quoting
                verdict = Verdict(
                    None,
                    reply.text,
                    reply.text.strip(),
                    "the judge's reply was cut off at max_tokens (finish_reason: length), "
                    "so it has no final verdict; raise scorer.sampling.max_tokens",
                )
            samples.append(
                {"score": verdict.score, "reasoning": verdict.reasoning, "raw": verdict.raw}
            )
            if verdict.score is None:
                raise failed(
                    "judge_unparseable",
                    f"{verdict.problem} (sample {s + 1} of {self.spec.judge_samples})",
                )


def _completion(context: Mapping[str, object]) -> str:
    return str(context["completion"])


def _score(sample: JudgeSample) -> float:
    """A read judgement's score (an unread one raised before it was kept with a score)."""
    score = sample["score"]
    assert score is not None
    return score
