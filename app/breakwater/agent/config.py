"""The agent's settings: one value from a TOML file, the environment and command-line flags.

Precedence: flags > environment (OPENAI_BASE_URL, OPENAI_API_KEY) > config file > defaults.
The config file is `$BREAKWATER_CONFIG`, else `~/.config/breakwater/config.toml`; a missing
default file is fine, a missing file named by the variable is an error. Other top-level keys
and tables (the workbench's settings may share the file) are left alone.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from breakwater.core.log.regular_file import MAX_CONFIG_BYTES, RefusedFile, read_regular
from breakwater.tools import sandbox as tool_sandbox
from breakwater.tools.sandbox import DEFAULT_MODE as DEFAULT_SANDBOX, MODES as SANDBOX_MODES

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# the openai client insists on a key; local servers (llama.cpp, Ollama, vLLM) ignore it
NO_KEY = "no-key"


class ConfigError(ValueError):
    """The settings cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class AgentConfig:
    base_url: str = DEFAULT_BASE_URL
    api_key: str = field(default=NO_KEY, repr=False)
    model: str | None = None           # None: the first model the endpoint lists
    summary_model: str | None = None   # None: `model`
    window: int | None = None          # None: the policy's window
    auto_approve: bool = False
    workspace: Path = field(default_factory=Path.cwd)
    preset: str = "breakwater"
    max_steps: int = 50
    # transient failures (429, 5xx, a dropped connection, a cut stream) per request
    max_retries: int = 5
    retry_base_s: float = 1.0
    retry_cap_s: float = 60.0
    request_timeout_s: float = 600.0    # longest gap between bytes (SSE keep-alives reset it)
    request_deadline_s: float = 1800.0  # one request, from sending it to its last chunk
    progress_timeout_s: float = 300.0   # longest wait for a chunk that adds to the reply
    temperature: float | None = None    # None: the server's default
    max_tokens: int | None = None       # cap on one reply; None: the server's default
    summary_temperature: float = 0.1
    summary_max_tokens: int = 2048
    sandbox: str = DEFAULT_SANDBOX     # where bash runs: auto | bwrap | none (breakwater.tools.sandbox)

    @property
    def summarizer_model(self) -> str | None:
        return self.summary_model or self.model

    @property
    def configured(self) -> bool:
        """Whether anything (flag, environment, config file) named an endpoint, a key or a model;
        if not, the workbench says how to configure one instead of calling OpenAI keyless."""
        return self.base_url != DEFAULT_BASE_URL or self.api_key != NO_KEY or self.model is not None


# config-file key -> the type it must have
_FILE_KEYS: dict[str, tuple[type, ...]] = {
    "base_url": (str,), "api_key": (str,), "model": (str,), "summary_model": (str,), "window": (int,),
    "auto_approve": (bool,), "workspace": (str,), "preset": (str,), "max_steps": (int,), "max_retries": (int,),
    "retry_base_s": (int, float), "retry_cap_s": (int, float), "request_timeout_s": (int, float),
    "request_deadline_s": (int, float), "progress_timeout_s": (int, float),
    "temperature": (int, float), "max_tokens": (int,), "summary_temperature": (int, float),
    "summary_max_tokens": (int,), "sandbox": (str,),
}


def config_path(env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """(path, explicit): explicit when named by BREAKWATER_CONFIG."""
    env = os.environ if env is None else env
    named = env.get("BREAKWATER_CONFIG")
    if named:
        return Path(named).expanduser(), True
    return Path("~/.config/breakwater/config.toml").expanduser(), False


def read_file(path: Path, explicit: bool) -> dict[str, Any]:
    try:
        data = tomllib.loads(read_regular(path, MAX_CONFIG_BYTES, "config file").decode("utf-8"))
    except RefusedFile as exc:   # a FIFO, a device, a directory, or megabytes: refused before reading
        raise ConfigError(f"config file {exc}") from None
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file {path} (from BREAKWATER_CONFIG) does not exist") from None
        return {}
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory") from None
    except PermissionError:
        raise ConfigError(f"config file {path}: permission denied") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML ({exc})") from None
    out: dict[str, Any] = {}
    for key, kinds in _FILE_KEYS.items():
        if key not in data:
            continue
        value = data[key]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise ConfigError(f"config file {path}: {key} must be {kinds[0].__name__}, got {value!r}")
        out[key] = value
    return out


def load_config(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> AgentConfig:
    """Merge defaults, the config file, the environment and `flags` (None values are unset)."""
    env = os.environ if env is None else env
    path, explicit = config_path(env)
    merged: dict[str, Any] = read_file(path, explicit)
    if env.get("OPENAI_BASE_URL"):
        merged["base_url"] = env["OPENAI_BASE_URL"]
    if env.get("OPENAI_API_KEY"):
        merged["api_key"] = env["OPENAI_API_KEY"]
    for key, value in (flags or {}).items():
        if value is not None:
            merged[key] = value
    known = {f.name for f in fields(AgentConfig)}
    unknown = sorted(set(merged) - known)
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
    if "workspace" in merged:
        merged["workspace"] = Path(merged["workspace"]).expanduser()
    for key in ("retry_base_s", "retry_cap_s", "request_timeout_s", "request_deadline_s", "progress_timeout_s",
                "temperature", "summary_temperature"):
        if isinstance(merged.get(key), int):
            merged[key] = float(merged[key])
    return validate(AgentConfig(**merged))


def validate(cfg: AgentConfig) -> AgentConfig:
    if not cfg.base_url.startswith(("http://", "https://")):
        raise ConfigError(f"base_url must start with http:// or https://, got {cfg.base_url!r}")
    if not cfg.api_key:
        raise ConfigError("api_key is empty")
    if cfg.window is not None and cfg.window < 256:
        raise ConfigError(f"window must be at least 256 tokens, got {cfg.window}")
    if cfg.max_steps < 1:
        raise ConfigError(f"max_steps must be at least 1, got {cfg.max_steps}")
    if cfg.max_retries < 0:
        raise ConfigError(f"max_retries must be 0 or more, got {cfg.max_retries}")
    if cfg.retry_base_s < 0 or cfg.retry_cap_s < cfg.retry_base_s:
        raise ConfigError("retry_base_s must be >= 0 and retry_cap_s >= retry_base_s")
    for key in ("request_timeout_s", "request_deadline_s", "progress_timeout_s"):
        if not getattr(cfg, key) > 0:
            raise ConfigError(f"{key} must be positive")
    if not 0 <= cfg.summary_temperature <= 0.2:
        raise ConfigError(f"summary_temperature must be between 0 and 0.2, got {cfg.summary_temperature}")
    if cfg.summary_max_tokens < 64:
        raise ConfigError(f"summary_max_tokens must be at least 64, got {cfg.summary_max_tokens}")
    if cfg.max_tokens is not None and cfg.max_tokens < 1:
        raise ConfigError("max_tokens must be positive")
    if cfg.sandbox not in SANDBOX_MODES:
        raise ConfigError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, got {cfg.sandbox!r}")
    if not cfg.workspace.is_dir():
        raise ConfigError(f"workspace {str(cfg.workspace)!r} is not a directory")
    return cfg


def resolve_sandbox(cfg: AgentConfig, *, network: bool = False, allow_secrets: bool = False,
                    env: Mapping[str, str] | None = None) -> tool_sandbox.Sandbox:
    """The sandbox bash runs in under these settings, with the config file (it may hold the
    key) hidden, and the usual secrets (~/.ssh, shell rc files...) unless `allow_secrets`;
    SandboxError when `sandbox = bwrap` cannot be honoured here."""
    path, _ = config_path(env)
    home = (env if env is not None else os.environ).get("HOME")
    hidden = [path] if allow_secrets else [path, *tool_sandbox.secrets(home)]
    return tool_sandbox.resolve(cfg.sandbox, hide=hidden, network=network)
