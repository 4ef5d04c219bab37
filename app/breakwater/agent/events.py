"""What the agent tells its watcher (the workbench, the headless runner) as it works.

One frozen dataclass with a `kind`; the fields a kind does not use stay None. Events are
delivered on the agent's event loop, in order, as things happen; a watcher that draws
must hand them to its own thread (the workbench posts them as messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from breakwater.core.log.edits import View
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.session_log import Event
from breakwater.tools.result import ToolResult

# request:    a request is about to be sent (`view`: what the pipeline made of the history)
# text:       a piece of the streamed reply (`text`)
# message:    a message was appended to the session log (`message`)
# tool_start: a tool call is about to run, or to wait for approval (`call`)
# tool_end:   a tool call finished or was denied (`call`, `result`)
# compaction: a deep compaction replaced older history with a summary (`event`)
# usage:      the API reported token usage for a request (`event`)
# retry:      a request failed and will be sent again (`event`: the error event, `text`)
# error:      something failed (`event` when it was logged, `text`)
# final:      the model answered without tool calls (`text`: the answer)
KINDS = ("request", "text", "message", "tool_start", "tool_end", "compaction", "usage", "retry", "error",
         "final")


@dataclass(frozen=True, slots=True)
class AgentEvent:
    kind: str
    turn: int
    text: str = ""
    message: Message | None = None
    event: Event | None = None
    view: View | None = None
    call: ToolCall | None = None
    result: ToolResult | None = None


EventCallback = Callable[[AgentEvent], None]
