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

from dataclasses import dataclass, field
from typing import Any

from evalgate._templating import TemplateProblem, compile_template, render
from evalgate.errors import InfraError
from evalgate.score._prompts import DEFAULT_TEMPLATES, fenced
from evalgate.score.verdict import Verdict, parse_reply, verdict_schema

__all__ = ["JUDGE_PROTOCOL", "Judge", "JudgeFailed", "judge_identity"]

# The version of what a judge's score means beyond its config: the default templates and the
# verdict parsing. In the fingerprint (run/fingerprint.py), so a baseline judged under another
# version is not compared with a PR judged under this one. 2: fenced, capped completions; one
# final verdict line; a reply cut off has none; structured verdicts (`verdict_format`).
JUDGE_PROTOCOL = 2


# Backends whose servers constrain the reply to a JSON schema given as `response_format`:
# llama.cpp (the embedded model: schema → grammar) and vLLM (guided decoding).
_CONSTRAINED = frozenset({"local", "vllm", "modal-vllm"})


class JudgeFailed(InfraError):
    """The judge gave no usable verdict: the rollout is an error of ``kind``, never a 0.
    ``partial``: what the record keeps all the same (the candidate's prompt, completion and
    usage, the judge's raw replies). An InfraError, not a RequestFailed: this module must not
    import the HTTP client (`validate` builds suites without loading it)."""

    def __init__(self, kind: str, detail: str, partial: dict[str, Any]) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.partial = partial


def _digest(value: Any) -> str:
    import hashlib
    import json

    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def judge_identity(spec: Any) -> str:
    """What identifies the judge in cache keys, stably across runs (not its port): backend,
    model id and a digest of its model config. Prompt and sampling are in the request body."""
    model = spec.model
    cfg = model.model_dump(mode="json", exclude={"name"})
    return "\n".join(["judge", model.backend, model.model_id, _digest(cfg)])


@dataclass
class Judge:
    """A compiled judge for one benchmark. ``client`` is bound by the run (a ChatClient on the
    judge's endpoint) before the first rollout; ``price``: USD per (input, output) token, or
    None when unknown."""

    spec: Any
    template: Any
    client: Any = None
    price: tuple[float, float] | None = (0.0, 0.0)
    stats: dict[str, int] = field(default_factory=lambda: {"calls": 0, "cache_hits": 0})
    labels: list[dict[str, Any]] | None = None  # its labelled set, loaded by the run
    # Pairwise: the baseline's completions, item id → by rollout; set by the run (None: none).
    baseline: dict[str, list[str]] | None = None

    @classmethod
    def from_spec(cls, spec: Any) -> Judge:
        """Raises :class:`TemplateProblem` for a template that does not compile."""
        text = spec.prompt_template or DEFAULT_TEMPLATES[spec.mode]
        return cls(spec=spec, template=compile_template(text))

    def response_format(self, scale: Any = None) -> dict[str, Any] | None:
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
        self, *, question: str, completion: str, reference: str, item_id: str, fields: Any
    ) -> dict[str, Any]:
        scale = self.spec.scale
        scaled = scale != "pass-fail"
        return {
            "question": question,
            "completion": completion,
            "reference": reference,
            "rubric": self.spec.rubric,
            "scale_min": scale.min if scaled else None,
            "scale_max": scale.max if scaled else None,
            "id": item_id,
            "item": dict(fields or {}),
        }

    def messages(self, context: dict[str, Any]) -> list[dict[str, str]]:
        """The judge's chat messages; raises TemplateProblem (a config error) on a failure.
        The completions are shown capped (:func:`shown`) and fenced by ``boundary``."""
        text = render(self.template, fenced(context))
        system = self.spec.system_prompt
        return [
            *([{"role": "system", "content": system}] if system else []),
            {"role": "user", "content": text},
        ]

    async def grade(self, context: dict[str, Any], *, usage: dict[str, int]) -> dict[str, Any]:
        """The judgement record (score = mean of k samples, each sample's reply and reasoning,
        the judge's usage and cost). ``usage``: the candidate's, kept on failure.
        Raises :class:`JudgeFailed`."""
        assert self.client is not None, "the run binds the judge's client first"
        try:
            messages = self.messages(context)
        except TemplateProblem as exc:
            raise JudgeFailed(
                "judge_template", str(exc), {"completion": context["completion"], "usage": usage}
            ) from None
        samples: list[dict[str, Any]] = []
        judge_usage = {"prompt_tokens": 0, "completion_tokens": 0}
        await self._ask(messages, self.spec.scale, context, usage, samples, judge_usage)
        scores = [float(s["score"]) for s in samples]
        return {
            "score": sum(scores) / len(scores),
            "samples": samples,
            "usage": judge_usage,
            "cost_usd": self._cost(judge_usage),
        }

    async def grade_pair(
        self, context: dict[str, Any], base: str, *, usage: dict[str, int]
    ) -> dict[str, Any]:
        """Pairwise: the PR's completion (``context["completion"]``) against the baseline's
        (``base``), shown in both orders, k samples each. ``score``: how much the judge prefers
        the PR's, averaged over orders and samples (1 better, 0.5 tie, 0 worse), so a judge
        that always picks the first response scores a tie, not a win. ``consistent``: the two
        orders gave the same preference (position-swap consistency)."""
        assert self.client is not None, "the run binds the judge's client first"
        pr = context["completion"]
        if pr == base:  # the same text ties with itself: no judge is asked (nor paid)
            note = "the same completion as the baseline's: a tie by construction"
            return {"score": 0.5, "note": note, "samples": []}  # not a test of position bias
        orders = (("base-first", base, pr, 0.0), ("pr-first", pr, base, 1.0))
        judge_usage = {"prompt_tokens": 0, "completion_tokens": 0}
        samples: list[dict[str, Any]] = []
        prefs = []
        for name, a, b, pr_is_a in orders:
            try:
                messages = self.messages({**context, "completion_a": a, "completion_b": b})
            except TemplateProblem as exc:
                raise JudgeFailed(
                    "judge_template", str(exc), {"completion": pr, "usage": usage}
                ) from None
            got: list[dict[str, Any]] = []
            await self._ask(messages, "pairwise", context, usage, got, judge_usage, samples)
            for sample in got:  # prefer-A → prefer-PR
                sample["order"] = name
                sample["score"] = sample["score"] if pr_is_a else 1.0 - sample["score"]
            samples.extend(got)
            prefs.append(sum(s["score"] for s in got) / len(got))
        return {
            "score": sum(prefs) / len(prefs),
            "orders": {name: p for (name, *_), p in zip(orders, prefs, strict=True)},
            "consistent": prefs[0] == prefs[1],
            # For the PASS decision the pair counts as its worse order for the PR: two orders
            # that disagree are no evidence of a tie (compare/position.py).
            "worse_order": min(prefs),
            "samples": samples,
            "usage": judge_usage,
            "cost_usd": self._cost(judge_usage),
        }

    async def _ask(
        self,
        messages: list[dict[str, str]],
        scale: Any,
        context: dict[str, Any],
        usage: dict[str, int],
        samples: list[dict[str, Any]],
        judge_usage: dict[str, int],
        earlier: list[dict[str, Any]] | None = None,
    ) -> None:
        """k judgements of ``messages`` appended to ``samples``; raises JudgeFailed (with
        ``earlier`` samples, ``samples`` and the usage so far kept)."""

        from evalgate.serve.client import RequestFailed  # the run has loaded it already

        response_format = self.response_format(scale)
        structured = response_format is not None

        def readable(text: str) -> bool:  # an unparseable reply is not cached: a re-run asks again
            return parse_reply(text, scale, structured=structured).score is not None

        for s in range(self.spec.judge_samples):
            try:
                reply = await self.client.chat(
                    messages,
                    rollout=s,
                    keep=readable,
                    complete_only=True,
                    response_format=response_format,
                )
            except RequestFailed as exc:
                raise JudgeFailed(
                    f"judge_{exc.kind}",
                    str(exc).partition(": ")[2] or exc.kind,
                    self._partial(context, usage, [*(earlier or []), *samples], judge_usage),
                ) from exc
            self.stats["calls"] += 1
            self.stats["cache_hits"] += int(reply.cached)
            for k in judge_usage:
                judge_usage[k] += int(reply.usage.get(k) or 0)
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
                raise JudgeFailed(
                    "judge_unparseable",
                    f"{verdict.problem} (sample {s + 1} of {self.spec.judge_samples})",
                    self._partial(context, usage, [*(earlier or []), *samples], judge_usage),
                )

    def _cost(self, usage: dict[str, int]) -> float | None:
        if self.price is None:
            return None
        return usage["prompt_tokens"] * self.price[0] + usage["completion_tokens"] * self.price[1]

    def _partial(
        self,
        context: dict[str, Any],
        usage: dict[str, int],
        samples: list[dict[str, Any]],
        judge_usage: dict[str, int],
    ) -> dict[str, Any]:
        judge = {"samples": samples, "usage": judge_usage, "cost_usd": self._cost(judge_usage)}
        return {"completion": context["completion"], "usage": usage, "judge": judge}
