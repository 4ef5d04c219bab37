"""Model metadata (SPEC §2): a model's context window and prices, from a maintained source.

The source is pydantic's `genai-prices` package (context_window and input, cache read/write and
output prices per model), imported only when a model is looked up: loading its data costs
~0.17 s, so a command that names no model never pays it. Lookups go by the name as the
transcript or `--model` spells it, then without a routing prefix (`litellm_proxy/…`,
`deepseek/…`).

Which model, which window, and where the window came from, one rule for every surface
(`simulate`, the workbench, `eval`): `--window`, else the window the session recorded, else the
named model's (`--model`, else the session's), else the policy's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

DEFAULT_MODEL = "gpt-4o"   # picks the tokenizer (o200k_base) when neither --model nor the session names one


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str               # the source's id for it
    window: int | None      # context window, input tokens
    input: float | None     # USD per million tokens, at the base tier
    cache_read: float | None
    cache_write: float | None
    output: float | None
    source: str             # "genai-prices 0.2.3"


def named_model(header: Mapping[str, Any], model: str | None) -> str | None:
    """The model named by `--model`, else by the session; None when neither names one."""
    named = model or header.get("model")
    return named if isinstance(named, str) and named else None


def counting_model(header: Mapping[str, Any], model: str | None) -> str:
    """The model whose tokenizer counts: the named one, else DEFAULT_MODEL (replay and simulate alike)."""
    return named_model(header, model) or DEFAULT_MODEL


def _price(value: Any) -> float | None:
    if value is None:
        return None
    base = getattr(value, "base", value)   # tiered prices: the base tier
    try:
        return float(base)
    except (TypeError, ValueError):
        return None


@lru_cache(maxsize=64)
def lookup(name: str) -> ModelInfo | None:
    """The model's window and prices, or None when the source does not know it (or is not installed)."""
    try:
        from importlib.metadata import version

        from genai_prices import data_snapshot
    except ImportError:
        return None
    snapshot = data_snapshot.get_snapshot()
    for ref in dict.fromkeys((name, name.rsplit("/", 1)[-1])):
        try:
            _, info = snapshot.find_provider_model(ref, None, None, None)
        except LookupError:
            continue
        prices = info.prices
        if isinstance(prices, list):   # conditional prices: the last applies now
            prices = prices[-1].prices if prices else None
        get = (lambda key: _price(getattr(prices, key, None))) if prices is not None else (lambda key: None)
        return ModelInfo(info.id, info.context_window, get("input_mtok"), get("cache_read_mtok"),
                         get("cache_write_mtok"), get("output_mtok"), f"genai-prices {version('genai-prices')}")
    return None


def resolve_window(header: Mapping[str, Any], model: str | None, explicit: int | None) -> tuple[int | None, str]:
    """(window, where it came from); None: the policy's own."""
    if explicit:
        return explicit, "--window"
    recorded = header.get("window")
    if isinstance(recorded, int) and recorded > 0:
        return recorded, "session"
    named = named_model(header, model)
    info = lookup(named) if named else None
    if info is not None and info.window:
        return info.window, f"model {info.name} ({info.source})"
    return None, "policy"
