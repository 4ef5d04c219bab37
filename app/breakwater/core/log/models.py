"""Model metadata (SPEC §2): a model's context window and prices, from a maintained source.

The source is pydantic's `genai-prices` package (context_window and input, cache read/write and
output prices per model). Loading it and its data costs 0.25-0.4 s, more than a whole `simulate`
of most sessions, so what it answered is kept on disk beside the tokenizer cache, keyed by the
installed data file (a new release of the package is asked again; the answers of the last few
installs are kept side by side, so that environments sharing a home do not keep invalidating each
other's), and it is imported only for a name not asked before. Lookups go by the name as the transcript or `--model` spells it, then
without a routing prefix (`litellm_proxy/…`, `deepseek/…`).

Which model, which window, and where the window came from, one rule for every surface
(`simulate`, the workbench, `eval`): `--window`, else the window the session recorded, else the
named model's (`--model`, else the session's), else the policy's.
"""

from __future__ import annotations

import json
import os
from dataclasses import astuple, dataclass
from importlib.util import find_spec
from pathlib import Path
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


_known: dict[str, ModelInfo | None] | None = None   # the disk cache, once read


def _cache_file() -> tuple[Path, str] | None:
    """(the cache's path, the key of the installed source), None when genai-prices is not installed."""
    spec = find_spec("genai_prices")
    if spec is None or not spec.submodule_search_locations:
        return None
    from breakwater.core.log.tokens import cache_dir

    try:
        st = (Path(next(iter(spec.submodule_search_locations))) / "data.py").stat()
    except OSError:
        return None
    return cache_dir().parent / "models.json", f"{st.st_size}-{st.st_mtime_ns}"


def lookup(name: str) -> ModelInfo | None:
    """The model's window and prices, or None when the source does not know it (or is not installed)."""
    global _known
    where = _cache_file()
    if where is None:
        return None
    path, key = where
    if _known is None:
        _known = {}
        try:
            saved = _installs(json.loads(path.read_text()))
            if key in saved:
                _known = {k: ModelInfo(*v) if v else None for k, v in saved[key].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass   # no cache yet, or an unreadable one: asked again
    if name not in _known:
        _known[name] = _from_source(name)
        try:
            try:   # read again: another install may have written its answers since
                saved = _installs(json.loads(path.read_text()))
            except (OSError, ValueError):
                saved = {}
            saved.pop(key, None)   # this install's answers last: the newest are kept
            saved[key] = {k: astuple(v) if v else None for k, v in _known.items()}
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"installs": dict(list(saved.items())[-INSTALLS_KEPT:])}))
            os.replace(tmp, path)
        except OSError:
            pass   # a read-only home: asked again next time
    return _known[name]


INSTALLS_KEPT = 8


def _installs(saved: object) -> dict:
    """The answers by install in a cache file as written (a file of one install's, as written before
    several were kept, gives that one); {} when it holds neither."""
    if not isinstance(saved, dict):
        return {}
    if isinstance(saved.get("installs"), dict):
        return {k: v for k, v in saved["installs"].items() if isinstance(v, dict)}
    if isinstance(saved.get("key"), str) and isinstance(saved.get("models"), dict):
        return {saved["key"]: saved["models"]}
    return {}


def _from_source(name: str) -> ModelInfo | None:
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
