"""The budget meter: what this invocation has spent, checked before every rollout starts.

Tokens and US dollars are counted from finished rollouts' ``usage`` (a resumed run's kept
results are added first, so the cap holds over the whole run); GPU seconds run while a `vllm` or
`modal-vllm` server is up, a judge's included (seconds × GPUs); wall-clock seconds from the
meter's creation. A cap is *reached* when the count is at or over it: from then on no rollout
starts, and the ones in flight finish (so tokens may end above the cap by at most what the
in-flight rollouts used).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from pydantic import JsonValue

from evalgate._json import mapping, number
from evalgate.config.spec.budget import BudgetSettings
from evalgate.config.spec.judge import JudgeScorer
from evalgate.errors import ConfigError
from evalgate.run.costs import cost_usd
from evalgate.run.rollouts import RolloutTable

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import Benchmark, Model
    from evalgate.suites import Item, Suite

__all__ = ["SELF_HOSTED", "BudgetMeter", "gpu_count", "model_price"]

# Backends whose tokens cost no money per token (the cost is the GPU's time: gpu_seconds).
SELF_HOSTED = ("local", "vllm", "modal-vllm")


def model_price(model: Model) -> tuple[float, float] | None:
    """(input, output) USD per token: 0 for self-hosted backends, the configured or listed price,
    or None when unknown."""
    if model.backend in SELF_HOSTED:
        return (0.0, 0.0)
    params = getattr(model, "params", None)
    one_in = cost_usd(model.model_id, 1, 0, params=params)
    one_out = cost_usd(model.model_id, 0, 1, params=params)
    if one_in is None or one_out is None:
        return None
    return (one_in, one_out)


def gpu_count(model: Model) -> int:
    """GPUs a server holds while up: 0 for backends that are not GPU servers evalgate starts."""
    if model.backend == "vllm":
        return int(model.tensor_parallel_size) * int(model.data_parallel_size)
    if model.backend == "modal-vllm":
        _, _, count = str(model.gpu).partition(":")
        return int(count or 1)  # the container's GPUs (Modal's TYPE:COUNT)
    return 0


def _amount(name: str, value: float) -> str:
    if name == "usd":
        return f"usd ${value:,.2f}" if value >= 1 else f"usd ${value:.4g}"
    shown = f"{int(value):,}" if float(value).is_integer() else f"{value:,.4g}"
    return f"{name} {shown}"


def _count(value: object) -> int:
    """A token count as spent: negative, non-finite or non-numeric counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return int(value) if 0 < value < float("inf") else 0


class BudgetMeter:
    """Spending so far against ``settings``' caps. Not thread-safe: one event loop uses it."""

    def __init__(
        self, settings: BudgetSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.caps = settings.caps()
        self.clock = clock
        self.started = clock()
        self.tokens = 0
        self.usd = 0.0
        self.price: tuple[float, float] = (0.0, 0.0)
        self._gpu_done = 0.0
        # Servers holding GPUs now, by holder (the model under test, each judge): since, GPUs.
        self._gpu_running: dict[str, tuple[float, int]] = {}
        self.reached: str | None = None  # e.g. "tokens 100,000", set once a cap is reached

    def use_model(self, model: Model) -> None:
        """Price the following tokens for ``model``; a ``usd`` cap needs a known price."""
        price = model_price(model)
        if price is None and "usd" in self.caps:
            raise ConfigError(
                f"budget.usd: no price is known for model {model.name!r} ({model.model_id}); "
                "give a litellm model params.input_cost_per_token / output_cost_per_token, "
                "or cap budget.tokens instead"
            )
        self.price = price or (0.0, 0.0)

    def add(self, usage: Mapping[str, object] | None) -> None:
        """Count one finished rollout's tokens (and their cost at the current model's price)."""
        # A negative count (from anywhere: a cached record, a backend's report) would lower
        # what was spent and lift every cap: refused, as is anything not a finite number.
        usage = usage or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        # The common counts (two non-negative ints, as the client parses them) taken as they
        # are; anything else through _count. Once per rollout: the two calls cost more than
        # the rest of the count.
        if type(prompt) is not int or prompt < 0:
            prompt = _count(prompt)
        if type(completion) is not int or completion < 0:
            completion = _count(completion)
        self.tokens += prompt + completion
        self.usd += prompt * self.price[0] + completion * self.price[1]

    def add_judge(self, judgement: Mapping[str, object]) -> None:
        """Count a judge's tokens and cost (priced for the judge model, not the candidate)."""
        usage = mapping(judgement.get("usage"))
        self.tokens += _count(usage.get("prompt_tokens")) + _count(usage.get("completion_tokens"))
        self.usd += number(judgement.get("cost_usd"))

    def add_records(self, records: Iterable[Mapping[str, object]]) -> None:
        for rec in records:
            self.add(mapping(rec.get("usage")))
            if rec.get("judge"):
                self.add_judge(mapping(rec["judge"]))

    def gpu_start(self, gpus: int, holder: str = "model") -> None:
        """``holder``'s server holds ``gpus`` GPUs from now on: the model under test, or a
        judge served beside it (both count, at once)."""
        if gpus > 0:
            self._gpu_running[holder] = (self.clock(), gpus)

    def gpu_stop(self, holder: str = "model") -> None:
        running = self._gpu_running.pop(holder, None)
        if running is not None:
            self._gpu_done += (self.clock() - running[0]) * running[1]

    def spent(self) -> dict[str, float]:
        now = self.clock()
        running = sum((now - since) * gpus for since, gpus in self._gpu_running.values())
        return {
            "usd": self.usd,
            "tokens": float(self.tokens),
            "gpu_seconds": self._gpu_done + running,
            "wall_s": self.clock() - self.started,
        }

    def exhausted(self) -> bool:
        """True once any cap is reached (and from then on): no new rollout may start."""
        if self.reached is not None:
            return True
        if not self.caps:
            return False
        spent = self.spent()
        for name, cap in self.caps.items():
            if spent[name] >= cap:
                self.reached = _amount(name, cap)
                return True
        return False

    def as_dict(self) -> dict[str, JsonValue]:
        """For metadata.json: the caps, what was spent, and which cap was reached."""
        caps: dict[str, JsonValue] = {**self.caps}
        spent: dict[str, JsonValue] = {k: round(v, 6) for k, v in self.spent().items()}
        return {"caps": caps, "spent": spent, "reached": self.reached}


def stop_reason(
    meter: BudgetMeter | None,
    records: Collection[Mapping[str, object]] | RolloutTable,
    n_items: int,
    rollouts: int,
) -> str | None:
    """ "budget: tokens 100,000 reached after 812 of 2,000 items" when the meter stopped this
    benchmark before every (item, rollout) ran; None when it ran to the end."""
    if meter is None or meter.reached is None or len(records) >= n_items * rollouts:
        return None
    per_item: dict[str, int] = {}
    for rec in records:
        item_id = str(rec["example_id"])
        per_item[item_id] = per_item.get(item_id, 0) + 1
    done = sum(1 for n in per_item.values() if n >= rollouts)
    return f"budget: {meter.reached} reached after {done:,} of {n_items:,} items"


# Kinds whose items are read without a download (an HF or verifiers dataset is not fetched just
# to print an estimate).
_LOCAL_KINDS = ("arith", "jsonl", "humaneval", "agent")
_CHARS_PER_TOKEN = 4  # a tokenizer-free estimate of prompt tokens (English text, BPE)


def _prompt_chars(suite: Suite, item: Item) -> int:
    """Characters sent as the prompt: the rendered chat messages (system prompt and template
    included) where the suite keeps them, else the item's own prompt text."""
    messages = getattr(suite, "messages", None)
    if isinstance(messages, dict) and item.id in messages:
        return sum(len(str(m.get("content", ""))) for m in messages[item.id])
    return len(item.prompt)


def _bench_estimate(
    bench: Benchmark, built: dict[str, list[Suite]]
) -> tuple[int | None, int | None, bool]:
    """(requests, prompt tokens, agent) for one benchmark; None where it can't be known offline.
    ``built``: suites already built by name (validate's checks built them: reading a large
    dataset twice doubled its time)."""
    from evalgate.suites import build_suites

    n = bench.eval.num_examples
    prompt_chars = None
    if bench.kind in _LOCAL_KINDS:
        try:
            suites = built.get(bench.name) or build_suites(bench)
        except Exception:  # an estimate must never fail validate; the run reports the real error
            suites = []
        if suites:
            items = suites[0].items
            n = len(items) * len(suites)
            prompt_chars = sum(_prompt_chars(suites[0], it) for it in items) * len(suites)
    if n is None:
        return None, None, bench.kind == "agent"
    rollouts = bench.eval.rollouts
    prompt = None if prompt_chars is None else prompt_chars * rollouts // _CHARS_PER_TOKEN
    return n * rollouts, prompt, bench.kind == "agent"


def estimate(
    config: Config, built: dict[str, list[Suite]] | None = None
) -> tuple[list[str], dict[str, float | None]]:
    """Lines describing what a run will ask for before anything is spent, and the totals
    (``tokens`` is an upper bound: prompts + max_tokens per request; ``usd`` None if unknown)."""
    lines: list[str] = []
    total_tokens: float | None = 0.0
    total_usd: float | None = 0.0
    per_bench = [(b, *_bench_estimate(b, built or {})) for b in config.benchmarks]
    for model in config.models:
        price = model_price(model)
        for bench, requests, prompt, agent in per_bench:
            more = "≥ " if agent else ""  # an agent makes one request per turn
            if requests is None:
                lines.append(f"  estimate {model.name} × {bench.name}: unknown (set num_examples)")
                total_tokens = total_usd = None
                continue
            completion = requests * bench.sampling.max_tokens
            tokens = None if prompt is None else prompt + completion
            if model.backend in SELF_HOSTED:
                cost: float | None = 0.0
            elif price is None or prompt is None:
                cost = None
            else:
                cost = prompt * price[0] + completion * price[1]
            shown_prompt = "?" if prompt is None else f"~{prompt:,}"
            shown_cost = "price unknown" if cost is None else f"≤ ${cost:,.4f}"
            if model.backend in SELF_HOSTED:
                shown_cost = "self-hosted (no per-token price; see gpu_seconds)"
            lines.append(
                f"  estimate {model.name} × {bench.name}: {more}{requests:,} requests, "
                f"{shown_prompt} prompt + ≤ {completion:,} completion tokens, {shown_cost}"
            )
            total_tokens = None if tokens is None or total_tokens is None else total_tokens + tokens
            total_usd = None if cost is None or total_usd is None else total_usd + cost
            judged = _judge_estimate(bench, requests, prompt)
            if judged is not None:  # the judge's calls are the run's too
                line, j_tokens, j_cost = judged
                lines.append(f"  estimate {model.name} × {bench.name}: {line}")
                total_tokens = (
                    None if j_tokens is None or total_tokens is None else total_tokens + j_tokens
                )
                total_usd = None if j_cost is None or total_usd is None else total_usd + j_cost
    return lines, {"tokens": total_tokens, "usd": total_usd}


def _judge_estimate(
    bench: Benchmark, requests: int, prompt: int | None
) -> tuple[str, float | None, float | None] | None:
    """A judged benchmark's judge calls: k per completion (× 2 orders pairwise), each prompt
    about the template, the question and a completion of up to max_tokens (~4 characters a
    token); an upper bound, as for the model."""
    scorer = getattr(bench, "scorer", None)
    if not isinstance(scorer, JudgeScorer):
        return None
    orders = 2 if scorer.mode == "pairwise" else 1
    calls = requests * scorer.judge_samples * orders
    template = len(scorer.prompt_template or "") // 4 or 150  # the defaults: ~150 tokens
    if prompt is None:
        j_prompt = None
    else:
        per_call = prompt / max(requests, 1) + template + orders * bench.sampling.max_tokens
        j_prompt = int(calls * per_call)
    completion = calls * scorer.sampling.max_tokens
    price = model_price(scorer.model)
    cost = None if price is None or j_prompt is None else (
        j_prompt * price[0] + completion * price[1])  # fmt: skip
    shown_prompt = "?" if j_prompt is None else f"~{j_prompt:,}"
    shown_cost = "price unknown" if cost is None else f"≤ ${cost:,.4f}"
    if scorer.model.backend in SELF_HOSTED:
        shown_cost = "self-hosted"
    tokens = None if j_prompt is None else j_prompt + completion
    line = (
        f"judge {scorer.model.model_id}: {calls:,} requests, {shown_prompt} prompt + "
        f"≤ {completion:,} completion tokens, {shown_cost}"
    )
    return line, tokens, cost
