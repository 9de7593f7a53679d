"""The model-graded scorer: a judge model grades each completion (``scorer: {type: judge}``).

The judge is part of the exam, not of the candidate: its model, prompt, scale and sampling are
the scorer's config, so they sit in the comparability fingerprint and in the base branch's
measurement (a PR that changes them is not compared, and cannot PASS).
"""

# Annotations are objects, not strings: see _base.

from functools import cache
from typing import Annotated, Literal, Self

from pydantic import Discriminator, Field, Tag, model_validator
from pydantic_core import PydanticCustomError

from evalgate.config.spec._base import Sampling, Strict
from evalgate.config.spec.models import LocalModel, Model

__all__ = ["GraderSpec", "JudgeScale", "JudgeScorer", "judge_sampling"]


@cache
def judge_sampling() -> Sampling:
    """A judge's default sampling: one frozen instance, made on first use (made at import, it
    built Sampling's validator, and loaded pydantic's plugins, for every config: issue #36)."""
    # A judge writes its reasoning before the verdict: 256 tokens would cut many verdicts off.
    return Sampling(max_tokens=512)


class JudgeScale(Strict):
    """A score on an integer scale, mapped to [0, 1] as (score - min) / (max - min)."""

    min: int = 1
    """Lowest score the judge may give."""
    max: int = Field(5, le=1000)
    """Highest score the judge may give."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max <= self.min:
            raise ValueError(f"scale.max ({self.max}) must be above scale.min ({self.min})")
        return self


def _scale_shape(value: object) -> str:
    return "pass-fail" if isinstance(value, str) else "scale"


# A mapping is validated as a scale only, so `{min: 5, max: 1}` reports what is wrong with it,
# not "must be 'pass-fail' (got dict)" from the other branch of the union.
ScaleField = Annotated[
    Annotated[Literal["pass-fail"], Tag("pass-fail")] | Annotated[JudgeScale, Tag("scale")],
    Discriminator(_scale_shape),
]


class JudgeScorer(Strict):
    """A judge model grades the completion: against a rubric (`rubric`), or against the
    reference answer (`reference`: fact / closed QA). A judge error or an unparseable verdict
    is an error (counted against `eval.max_error_rate`), never a 0."""

    type: Literal["judge"]
    mode: Literal["rubric", "reference", "pairwise"] = "rubric"
    """`rubric`: the completion against `rubric` (the reference answer is shown when the item
    has one); `reference`: does the completion state the reference answer (pass/fail);
    `pairwise`: the PR's completion against the baseline's for the same item, in both orders
    (metric `win_rate`: 1 better, 0.5 tie, 0 worse; the baseline scores 0.5 by construction)."""
    rubric: str = "The response answers the question correctly, completely and concisely."
    """What a good response does (rubric mode); the template sees it as `rubric`."""
    scale: ScaleField = "pass-fail"
    """`pass-fail` (1 or 0), or an integer scale `{min: 1, max: 5}` mapped to [0, 1]."""
    model: Model = Field(default_factory=LocalModel)
    """The judge model, served by any backend like `models:` (default: the embedded model,
    a plumbing check only: a 135M model is no judge)."""
    sampling: Sampling = Field(default_factory=judge_sampling)
    """The judge's own sampling (not the benchmark's)."""
    judge_samples: int = Field(1, ge=1, le=32)
    """Judgements per completion (k), averaged; sample s uses seed + s."""
    prompt_template: str | None = None
    """Jinja2 template (sandboxed) for the judge's user message; default: one per mode. Sees
    `question`, `completion`, `reference`, `rubric`, `scale_min`, `scale_max`, `id` and the
    item's fields as `item` (pairwise: `completion_a` and `completion_b` instead of
    `completion`), each completion capped at 32,000 characters (the cut marked), and `boundary`,
    a tag no completion can contain, to fence them with. It must ask for a final line
    `VERDICT: <PASS|FAIL|number>` (pairwise: `VERDICT: <A|B|TIE>`)."""
    system_prompt: str | None = None
    """System message for the judge (none by default)."""
    verdict_format: Literal["auto", "json", "text"] = "auto"
    """How the judge gives its verdict. `json`: asked as structured output (`response_format`
    with a JSON schema: `{"reasoning": ..., "verdict": ...}`), which llama.cpp (`local`), vLLM
    and OpenAI-style structured outputs constrain the reply to, so even a small judge gives a
    readable verdict; `text`: a final line `VERDICT: ...` only; `auto` (default): `json` on
    the backends that constrain output (`local`, `vllm`, `modal-vllm`), else `text`. Either
    way the prompt asks for the `VERDICT:` line, and a reply that is not JSON is read as text."""
    labels: str | None = None
    """A labelled set for `evalgate judge-check` (JSONL of question, completion, reference,
    label), relative to the evals.yaml; the scorecard shows the judge's measured agreement."""

    @model_validator(mode="after")
    def _fields_fit_the_mode(self) -> Self:
        # Raised on the field at fault (the loader names its line), not on the whole scorer.
        if self.mode == "reference" and self.scale != "pass-fail":
            _wrong("scale", "mode reference grades pass/fail: leave `scale` out")
        if self.mode == "pairwise" and self.scale != "pass-fail":
            _wrong("scale", "mode pairwise asks which is better (A, B or TIE): leave `scale` out")
        # Compared with the default, not "was it set": a saved run_config.json sets every field.
        if self.rubric != type(self).model_fields["rubric"].default:
            if not self.rubric.strip():
                _wrong("rubric", "is empty: the judge would grade against nothing")
            # The reference prompt never shows a rubric: one given there is silently unused.
            template = self.prompt_template
            if self.mode == "reference" and (template is None or "rubric" not in template):
                _wrong(
                    "rubric",
                    "mode reference checks the answer against the reference and shows no "
                    "rubric: use mode rubric (the reference is shown too), or leave `rubric` out",
                )
        return self


def _wrong(field: str, message: str) -> None:
    """A mistake of ``field`` that only the other fields reveal (loader: ``field_combo``)."""
    raise PydanticCustomError("field_combo", message, {"field": field})


class GraderSpec(Strict):
    """The judge an inspect task's model-graded scorers use (inspect's `grader` model role:
    `model_graded_qa`, `model_graded_fact` and any scorer asking for that role). Served by
    evalgate like `scorer.model`, and part of the exam like it."""

    model: Model = Field(default_factory=LocalModel)
    """The grader model, served by any backend."""
    sampling: Sampling = Field(default_factory=judge_sampling)
    """The grader's own sampling."""
