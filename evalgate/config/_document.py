"""The evals.yaml document as written (before layering): its models, benchmark entries (a
registry name, or an entry with overrides or an inline ``kind``) and settings."""

# Annotations are objects, not strings: see evalgate.config.spec._base.

from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)

from evalgate.config.spec import (
    AgentBenchmark,
    ArithBenchmark,
    BaselineSettings,
    Benchmark,
    BudgetSettings,
    EvalSettings,
    FileBenchmark,
    GateSettings,
    HFBenchmark,
    HumanEvalBenchmark,
    InspectBenchmark,
    LocalModel,
    Model,
    PublishSettings,
    Sampling,
    Strict,
    VerifiersBenchmark,
)

__all__ = ["BENCHMARK_KINDS", "BenchmarkEntry", "EvalsFile"]


class BenchmarkEntry(Strict):
    """A benchmark in evals.yaml: a registry name with overrides, or inline with `kind`."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    """Registry name (see `evalgate benchmarks`) or, with `kind`, your own label."""
    kind: Literal["arith", "jsonl", "hf", "agent", "humaneval", "verifiers", "inspect"] | None = (
        None
    )
    """Set for an inline benchmark; omit to use the registry's definition."""
    sampling: dict[str, object] | None = None
    """Sampling overrides for this benchmark."""
    eval: dict[str, object] | None = None
    """Eval overrides for this benchmark."""


def _entry_shape(value: object) -> str:
    return "entry" if isinstance(value, dict | BenchmarkEntry) else "name"


# A mapping is validated as an entry only, so `kind: parquet` reports the kind, not "must be a
# valid string (got dict)" from the other branch of the union.
BenchmarkItem = Annotated[
    Annotated[str, Tag("name")] | Annotated[BenchmarkEntry, Tag("entry")],
    Discriminator(_entry_shape),
]


class EvalsFile(Strict):
    """evals.yaml: which models, which benchmarks, and the gate policy."""

    version: Literal[1] = 1
    """Schema version."""
    models: list[Model] = Field(default_factory=lambda: list[Model]([LocalModel()]), min_length=1)
    """Models under test; defaults to the embedded model."""
    benchmarks: list[BenchmarkItem] = Field(min_length=1)
    """Benchmarks to run: registry names, or entries with overrides or inline definitions."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling applied to every benchmark (a benchmark's entry overrides it)."""
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """Eval settings applied to every benchmark (a benchmark's entry overrides it)."""
    gate: GateSettings = Field(default_factory=GateSettings)
    """Gate policy."""
    baseline: BaselineSettings = Field(default_factory=BaselineSettings)
    """Where the baseline comes from (used by the Action)."""
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    """Spending caps for one invocation (tokens, US dollars, GPU seconds, wall-clock seconds)."""
    publish: PublishSettings = Field(default_factory=PublishSettings)
    """Opt-in publishing of the results (a Hugging Face dataset repository)."""


# kind → its benchmark model.
BENCHMARK_KINDS: dict[str, type[Benchmark]] = {
    "arith": ArithBenchmark,
    "jsonl": FileBenchmark,
    "hf": HFBenchmark,
    "agent": AgentBenchmark,
    "humaneval": HumanEvalBenchmark,
    "verifiers": VerifiersBenchmark,
    "inspect": InspectBenchmark,
}
