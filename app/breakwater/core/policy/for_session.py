"""The policy a session is simulated or replayed under, from what the command line or the workbench
asked for and what the session recorded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from breakwater.core.log.models import resolve_window
from breakwater.core.policy import DEFAULT_PRESET, PRESETS, Policy, PolicyError, from_mapping, load_toml, preset

if TYPE_CHECKING:
    import argparse

    from breakwater.core.log.session_log import SessionLog


def resolve_policy(args: argparse.Namespace, log: SessionLog | None) -> Policy:
    """--policy, else --preset, else the policy the session was recorded under, else the default;
    then the window: --window, else (no policy file given) the session's, else its model's
    (core/log/models.py). Where the window came from is left in `args.window_source`."""
    header = log.header if log else {}
    if getattr(args, "policy", None):
        policy = load_toml(Path(args.policy))
    elif getattr(args, "preset", None):
        policy = preset(args.preset)
    elif isinstance(header.get("policy"), dict):
        try:  # a recording of our own agent: replay under exactly its policy
            policy = from_mapping(header["policy"])
        except PolicyError as exc:
            raise PolicyError(f"the policy recorded in the session is not usable ({exc}); pass --preset") from None
    else:
        recorded = header.get("preset")
        policy = preset(recorded if recorded in PRESETS else DEFAULT_PRESET)
    if getattr(args, "policy", None) and not getattr(args, "window", None):
        window, source = None, "policy file"   # a file's window is part of the policy it states
    else:
        window, source = resolve_window(header, getattr(args, "model", None), getattr(args, "window", None))
    args.window_source = source
    if isinstance(window, int) and window != policy.window:
        policy = policy.with_changes(window=window)
    return policy
