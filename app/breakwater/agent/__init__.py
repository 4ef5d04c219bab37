"""The live agent (SPEC §8): an OpenAI-compatible ReAct loop around the compaction pipeline.

    config = load_config({"model": "gpt-4o-mini", "workspace": "."})
    async with AgentSession(config, approve=ask_user, on_event=draw) as agent:
        answer = await agent.send("Fix the failing test")

Plain Python: nothing here imports the UI.
"""

import importlib

# Loaded on first use: the session module imports the openai client, which commands that never
# talk to a model (and this package's light modules) should not pay for.
_EXPORTS = {"AgentConfig": "config", "ConfigError": "config", "load_config": "config", "AgentEvent": "events",
            "AgentError": "session", "AgentSession": "session", "RunResult": "session", "run_agent": "session"}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"breakwater.agent.{module}"), name)


__all__ = ["AgentConfig", "AgentError", "AgentEvent", "AgentSession", "ConfigError", "RunResult", "load_config",
           "run_agent"]
