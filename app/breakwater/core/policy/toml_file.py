"""Policy files: save a Policy as TOML that `--policy` reads back as the same Policy.

Every value is written, not only those that differ from the preset, so the file keeps its
meaning if a preset's defaults change later; values that differ from the preset carry a
comment with the preset's value.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import tomli_w

from breakwater.core.policy import Policy, PolicyError, load_toml, preset, preset_names, validate
from breakwater.core.policy.field_groups import field_specs


def _toml(value) -> str:
    return tomli_w.dumps({"v": value}).removeprefix("v = ").rstrip("\n")


def dumps(policy: Policy) -> str:
    validate(policy)
    base = preset(policy.preset)  # also refuses a preset name the file could not be read back with
    lines = [f"# Breakwater policy, starting from preset {policy.preset!r}; every value is listed,",
             "# those that differ from the preset say its value.", f"preset = {_toml(policy.preset)}"]
    group = None
    for spec in field_specs():
        if spec.group != group:
            group = spec.group
            lines.append(f"\n# -- {group}")
        value = getattr(policy, spec.name)
        line = f"{spec.name} = {_toml(value)}"
        notes = [spec.unit] if spec.unit and spec.kind not in (bool, str) else []
        if value != getattr(base, spec.name):
            notes.append(f"{policy.preset}: {_toml(getattr(base, spec.name))}")
        lines.append(f"{line}  # {'; '.join(notes)}" if notes else line)
    return "\n".join(lines) + "\n"


def save(policy: Policy, path: str | Path) -> Path:
    """Write atomically: a failed save leaves an existing file as it was."""
    path = Path(path).expanduser()
    text = dumps(policy)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot write there ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise PolicyError(f"{path}: cannot write there ({exc.strerror or exc})") from None
    return path


def resolve(spec: str) -> Policy:
    """A preset name or the path of a policy file (what `--compare` takes)."""
    if spec in preset_names():
        return preset(spec)
    path = Path(spec).expanduser()
    if path.suffix == ".toml" or path.exists():
        return load_toml(path)
    raise PolicyError(f"{spec!r} is neither a preset ({', '.join(preset_names())}) nor a policy file")


__all__ = ["dumps", "save", "resolve"]
