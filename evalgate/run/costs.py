"""What a run's tokens cost, in US dollars, from LiteLLM's price list.

The list is the copy bundled in the installed ``litellm`` wheel
(``model_prices_and_context_window_backup.json``, the file LiteLLM itself reads when
``LITELLM_LOCAL_MODEL_COST_MAP=True``): never fetched, so a run's cost depends only on what is
installed. It is read as JSON rather than through ``import litellm``, which takes ~5 s and loads
a ``.env`` from the working directory into the process.

Prices are per token and linear, so the cost of a run's usage totals equals the sum of its calls'
costs. Not modelled: tiered prices (``…_above_200k_tokens``, which apply per call, not to totals),
cached-input discounts and batch prices; evalgate records none of those token kinds.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["PRICE_FILE", "cost_usd", "format_usd", "price_per_token"]

PRICE_FILE = "model_prices_and_context_window_backup.json"
# LiteLLM providers whose entries carry a more specific provider name (vertex_ai-language-models,
# bedrock_converse): a model string's prefix matches any entry of its family.
_PROVIDER_FAMILIES = ("vertex_ai", "bedrock", "fireworks_ai")


def _litellm_dir() -> Path | None:
    """LiteLLM's package folder: here, or in the side venv the proxy runs from."""
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    python = os.environ.get("EVALGATE_LITELLM_PYTHON")
    if not python:
        return None
    probe = "import importlib.util as u; s = u.find_spec('litellm'); print(s and list(s.submodule_search_locations)[0] or '')"  # noqa: E501
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout.strip()
    return Path(text) if out.returncode == 0 and text else None


@functools.cache
def _price_list() -> dict[str, dict[str, object]]:
    """The bundled list, keys lower-cased (LiteLLM matches names so); {} without LiteLLM."""
    folder = _litellm_dir()
    if folder is None:
        return {}
    path = folder / PRICE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {
        key.lower(): info
        for key, info in data.items()
        if isinstance(info, dict) and key != "sample_spec"
    }


def _same_provider(entry: str | None, wanted: str | None) -> bool:
    if wanted is None or entry is None or entry == wanted:
        return True
    return any(wanted.startswith(f) and entry.startswith(f) for f in _PROVIDER_FAMILIES)


def price_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token for a LiteLLM model string; None when it is not listed.

    None also when the list prices it some other way (tiers only, per character, per hour): an
    unknown price is not a zero price.

    Looked up as LiteLLM does for the common forms: the string itself (``gpt-4o-mini``,
    ``gemini/gemini-2.0-flash``), then ``provider/name`` as ``name`` listed under that provider
    (``openai/gpt-4o-mini``). A Hugging Face id (``org/model``) matches nothing.
    """
    prices = _price_list()
    name = model.strip().lower()
    provider, _, rest = name.partition("/")
    candidates = [(name, None)] + ([(rest, provider)] if rest else [])
    for key, wanted in candidates:
        info = prices.get(key)
        listed = info.get("litellm_provider") if info is not None else None
        if info is None or not _same_provider(listed if isinstance(listed, str) else None, wanted):
            continue
        if info.get("input_cost_per_token") is None and info.get("output_cost_per_token") is None:
            continue
        return (
            _number(info.get("input_cost_per_token") or 0.0),
            _number(info.get("output_cost_per_token") or 0.0),
        )
    return None


def cost_usd(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    *,
    params: Mapping[str, object] | None = None,
) -> float | None:
    """US dollars for these token counts; None when the model's price is unknown.

    ``params`` are a ``litellm`` model's ``params``: LiteLLM's own custom-price keys
    (``input_cost_per_token``, ``output_cost_per_token``) there take precedence over the list,
    as they do in the proxy (self-hosted models, negotiated prices).
    """
    custom = params or {}
    listed = price_per_token(model)
    if listed is None and not any(
        k in custom for k in ("input_cost_per_token", "output_cost_per_token")
    ):
        return None
    listed_in, listed_out = listed or (0.0, 0.0)
    price_in = _number(custom.get("input_cost_per_token", listed_in))
    price_out = _number(custom.get("output_cost_per_token", listed_out))
    return prompt_tokens * price_in + completion_tokens * price_out


def _number(value: object) -> float:
    """``float(value)`` for what a YAML config holds (a custom price written as text too)."""
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"a price must be a number, not {type(value).__name__}")


def format_usd(value: float | None) -> str:
    """Dollars for people: cents from $1 up, two significant digits below (a small model's run
    costs $0.000048, which a fixed four decimals would print as $0.0000); "–" when unknown."""
    if value is None or math.isnan(value):
        return "–"
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = min(12, max(2, 1 - math.floor(math.log10(abs(value)))))
    return f"${value:.{decimals}f}"
