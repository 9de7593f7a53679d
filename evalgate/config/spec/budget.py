"""Budget caps: what one invocation may spend before evalgate stops sending requests.

Enforcement lives in :mod:`evalgate.run.budget` (the meter) and :mod:`evalgate.run.engine` (no new
rollout once a cap is reached); this module is the schema and the base branch's ceiling.
"""

# Annotations are objects, not strings: see _base.

from pydantic import Field

from evalgate.config.spec._base import Strict

__all__ = ["BUDGET_FIELDS", "BudgetSettings", "apply_ceiling"]

BUDGET_FIELDS = ("usd", "tokens", "gpu_seconds", "wall_s")


class BudgetSettings(Strict):
    """Spending caps; null means no cap. When one is reached no new request is sent, requests in
    flight finish, results are kept and the verdict is ERROR (exit 3); `evalgate resume RUN
    --budget.FIELD=...` continues. In the Action, the base branch's caps are a ceiling."""

    usd: float | None = Field(None, gt=0)
    """US dollars for the run's tokens: LiteLLM's price list, or the model's configured
    `params.input_cost_per_token` / `output_cost_per_token`. Counted over the run's results, so a
    resumed run's earlier spending counts."""
    tokens: int | None = Field(None, ge=1)
    """Prompt + completion tokens over the run's results (a resumed run's earlier ones count)."""
    gpu_seconds: float | None = Field(None, gt=0)
    """GPU time of `vllm` and `modal-vllm` servers (seconds up × GPUs), this invocation."""
    wall_s: float | None = Field(None, gt=0)
    """Wall-clock seconds since this invocation started (server start-up included)."""

    def caps(self) -> dict[str, float]:
        """The caps that are set, by field."""
        return {f: float(v) for f in BUDGET_FIELDS if (v := getattr(self, f)) is not None}


def apply_ceiling(
    own: BudgetSettings, ceiling: BudgetSettings
) -> tuple[BudgetSettings, str | None]:
    """The PR's budget held under the base branch's: each cap is the lower of the two, and a
    cap the PR leaves unset (null) is the base's. Returns the budget to use and a note naming
    what the PR tried to raise (None when it raised nothing)."""
    merged: dict[str, float | int | None] = {}
    raised: list[str] = []
    for name in BUDGET_FIELDS:
        mine, base = getattr(own, name), getattr(ceiling, name)
        if base is None or (mine is not None and mine <= base):
            merged[name] = mine
        else:  # unset in the PR inherits the base's cap; a higher one is held down to it
            merged[name] = base
            if mine is not None:
                raised.append(f"{name} {mine:,} > {base:,}")
    note = None
    if raised:
        note = "budget: the base branch's caps are a ceiling; kept: " + "; ".join(raised)
    return BudgetSettings.model_validate(merged), note
