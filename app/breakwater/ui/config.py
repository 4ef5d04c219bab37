"""The workbench's settings: the `[ui]` table of the one Breakwater config file
(`$BREAKWATER_CONFIG`, else `~/.config/breakwater/config.toml`), so tests stay hermetic by
pointing the variable at a file of their own.

    [ui]
    theme = "breakwater-light"
    [ui.keymap]          # binding id = keys (see the help screen, F1, for the ids)
    step_forward = "l,right"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from breakwater.agent.config import config_path
from breakwater.core.log.regular_file import MAX_CONFIG_BYTES, read_regular


class UISettingsError(Exception):
    pass


@dataclass(frozen=True)
class UISettings:
    theme: str | None = None
    keymap: Mapping[str, str] = field(default_factory=dict)
    play_interval: float = 0.5     # seconds per turn at speed 1×

    @classmethod
    def load(cls, path: Path | None = None) -> "UISettings":
        explicit = path is not None
        if path is None:
            path, explicit = config_path()
        try:
            data = tomllib.loads(read_regular(path, MAX_CONFIG_BYTES, "config file").decode("utf-8"))
        except FileNotFoundError:
            if explicit:
                raise UISettingsError(f"config file {path} does not exist") from None
            return cls()
        except (OSError, UnicodeDecodeError) as exc:
            raise UISettingsError(f"config file {path} cannot be read ({exc})") from None
        except tomllib.TOMLDecodeError as exc:
            raise UISettingsError(f"config file {path} is not valid TOML ({exc})") from None
        ui = data.get("ui") or {}
        if not isinstance(ui, dict):
            raise UISettingsError(f"config file {path}: [ui] must be a table")
        theme = ui.get("theme")
        keymap = ui.get("keymap") or {}
        interval = ui.get("play_interval", 0.5)
        if theme is not None and not isinstance(theme, str):
            raise UISettingsError(f"config file {path}: ui.theme must be a string")
        if not isinstance(keymap, dict) or not all(isinstance(v, str) for v in keymap.values()):
            raise UISettingsError(f"config file {path}: [ui.keymap] maps binding ids to key strings")
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or interval <= 0:
            raise UISettingsError(f"config file {path}: ui.play_interval must be a positive number of seconds")
        return cls(theme=theme, keymap=dict(keymap), play_interval=float(interval))
