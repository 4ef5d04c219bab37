"""The live agent (SPEC §8): an OpenAI-compatible ReAct loop around the compaction pipeline.

    config = load_config({"model": "gpt-4o-mini", "workspace": "."})
    async with AgentSession(config, approve=ask_user, on_event=draw) as agent:
        answer = await agent.send("Fix the failing test")

Plain Python: nothing here imports the UI.
"""

from breakwater.agent.config import AgentConfig, ConfigError, load_config
from breakwater.agent.events import AgentEvent
from breakwater.agent.session import AgentError, AgentSession, RunResult, run_agent

__all__ = ["AgentConfig", "AgentError", "AgentEvent", "AgentSession", "ConfigError", "RunResult", "load_config",
           "run_agent"]
