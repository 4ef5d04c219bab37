"""The live agent (SPEC §8): a ReAct loop over an OpenAI-compatible endpoint.

Every request goes through the compaction pipeline; every event — message, tool result,
usage, compaction, error — is appended to the session log as it happens and fed to the
same pipeline, so replaying the log gives back each request's view. Around the loop sits
the memory tier (SPEC §6): the project history goes into the system message at session
start, retrieval runs beside the first request of each user message and lands in the
volatile layer, the scribe gets snapshots in the background, and the session's summary is
appended to PROJECT_MEMORY.md at the end.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import openai

from breakwater.agent.approval import Approver, denied_result
from breakwater.agent.chat import (
    CONTEXT_LENGTH,
    MAX_RETRY_AFTER_S,
    TRANSIENT,
    Assembler,
    Deadlines,
    Failure,
    Reply,
    StreamCut,
    backoff_delay,
    classify,
    one_line,
    stream_chat,
)
from breakwater.agent.config import AgentConfig, resolve_sandbox
from breakwater.agent.events import AgentEvent, EventCallback
from breakwater.agent.redact import Redactor
from breakwater.core.review import Reviewer, SummaryDecision, SummaryProposal
from breakwater.agent.summarizer import LLMSummarizer
from breakwater.core.log.beneath import OwnedDir
from breakwater.core.log.edits import View
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.cache_worth import CachePricing
from breakwater.core.fold.pipeline import Compaction, Pipeline
from breakwater.core.policy import Policy, preset
from breakwater.core.stages.prompt import (
    RETRIEVED_HEADER,
    session_context,
    static_system,
    system_prompt,
    volatile_context,
    with_volatile,
)
from breakwater.core.log.session_log import Event, LogWriteError, SessionLog, new_session_id, utc_now
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.log.tokens import TokenCounter, heuristic_messages, heuristic_text
from breakwater.core.log.validity import api_problems
from breakwater.memory.consolidate import consolidate
from breakwater.memory.ledger import STATE_DIR
from breakwater.memory.project import append_session, project_history
from breakwater.memory.retrieval import format_injection, retrieve_within
from breakwater.memory.scribe import Scribe
from breakwater.memory.store import MemoryStore
from breakwater.tools.registry import ToolContext, execute_tool, needs_approval, tool_schemas
from breakwater.tools.result import ToolResult
from breakwater.tools.sandbox import Sandbox, SandboxError
from breakwater.tools.state_guard import StateGuard
from breakwater.tools.workspace import Workspace, WorkspaceError

SESSIONS_DIR = Path(".agent") / "sessions"
MAX_CALL_ID_CHARS = 256       # OpenAI's are about 40; an id is sent back with every later request
SCRIBE_CLOSE_S = 10.0


class AgentError(Exception):
    """The run cannot go on. The message is one line for the user; the log says the rest."""

    def __init__(self, message: str, session_path: Path | None = None):
        super().__init__(message)
        self.session_path = session_path


@dataclass(frozen=True, slots=True)
class RunResult:
    answer: str
    session_path: Path
    session_id: str
    steps: int


def session_file_name(session_id: str, now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{session_id[:8]}.jsonl"


def resolve_policy(config: AgentConfig, policy: Policy | None = None) -> Policy:
    policy = policy or preset(config.preset)
    if config.window is not None and config.window != policy.window:
        policy = policy.with_changes(window=config.window)
    return policy


class AgentSession:
    """One conversation with the model in one workspace, recorded in one session file.

    `await send(text)` runs the loop for one user message until the model answers without
    tool calls, and returns that answer. `await close()` ends the session (memory is
    written then). Use it as `async with AgentSession(...) as agent:`.
    """

    def __init__(self, config: AgentConfig, *, policy: Policy | None = None, approve: Approver | None = None,
                 on_event: EventCallback | None = None, review: Reviewer | None = None):
        self.config = config
        self.policy = resolve_policy(config, policy)
        self.approve = approve
        self.review = review        # set while a person watches: deep compactions wait for their answer
        self.last_review: SummaryDecision | None = None
        self.on_event = on_event
        self.redact = Redactor(config.api_key)
        self._deadlines = Deadlines(config.request_deadline_s, config.progress_timeout_s)
        self.static = static_system(tool_schemas())
        self.tools = tool_schemas()
        self.log: SessionLog | None = None
        self.pipe: Pipeline | None = None
        self.model: str = config.model or ""
        self.session_id = ""
        self.steps = 0
        self.last_view: View | None = None
        self.last_answer = ""
        self._client: openai.AsyncOpenAI | None = None
        self._summary_client: openai.OpenAI | None = None
        self.summarizer: LLMSummarizer | None = None
        self._workspace: Workspace | None = None
        self._ctx: ToolContext | None = None
        self.sandbox: Sandbox | None = None
        self._store: MemoryStore | None = None
        self._scribe: Scribe | None = None
        self._scribe_from = 0
        self._call_ids: set[str] = set()
        self._guard: StateGuard | None = None
        self._volatile = ""
        self._sent_with: dict[str, str] = {}   # user message id -> the volatile layer it went out with
        self._start_lock = asyncio.Lock()
        self._turn_lock = asyncio.Lock()
        self._pipe_lock = asyncio.Lock()
        self._started = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return self.log.path if self.log is not None else None

    @property
    def workspace(self) -> Path:
        return self._workspace.root if self._workspace is not None else Path(self.config.workspace).resolve()

    async def __aenter__(self) -> "AgentSession":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the session: the client, the session file, the system prompt, the scribe."""
        async with self._start_lock:
            if not self._started:
                await self._start()

    async def _start(self) -> None:
        cfg = self.config
        try:
            self._workspace = Workspace(cfg.workspace)
        except WorkspaceError as exc:
            raise AgentError(str(exc)) from None
        root = self._workspace.root
        self._tool_env, scrubbed = self.redact.tool_environment()
        try:
            self.sandbox = resolve_sandbox(cfg, network=self.policy.bash_network,
                                           show_home=self.policy.tool_allow_secrets)
        except SandboxError as exc:
            raise AgentError(str(exc)) from None
        self._client = openai.AsyncOpenAI(base_url=cfg.base_url, api_key=cfg.api_key, max_retries=0,
                                          timeout=cfg.request_timeout_s)
        try:
            await self._open(root)
        except BaseException:
            await self._client.close()
            if self._summary_client is not None:
                self._summary_client.close()
            raise
        self._started = True
        self._begin(root, scrubbed)

    async def _open(self, root: Path) -> None:
        cfg = self.config
        if not self.model:
            self.model = await self._discover_model()
        summary_model = cfg.summary_model or self.model
        self._summary_client = openai.OpenAI(base_url=cfg.base_url, api_key=cfg.api_key, max_retries=0,
                                             timeout=cfg.request_timeout_s)
        self.summarizer = LLMSummarizer(self._summary_client, summary_model, window=self.policy.window,
                                        max_tokens=cfg.summary_max_tokens, temperature=cfg.summary_temperature,
                                        retry_cap_s=min(10.0, cfg.retry_cap_s), redact=self.redact)
        self.session_id = new_session_id()
        header = {"id": self.session_id, "agent": "breakwater", "model": self.model, "summary_model": summary_model,
                  "base_url": self.redact(cfg.base_url), "workspace": str(root), "window": self.policy.window,
                  "preset": self.policy.preset, "policy": self.policy.to_dict()}
        path = root / SESSIONS_DIR / session_file_name(self.session_id)
        try:
            self.log = SessionLog.create(path, header, anchor=root)
        except OSError as exc:
            raise AgentError(f"cannot create the session file {path}: {exc.strerror or exc}") from None
        self.pipe = Pipeline(self.policy, TokenCounter.for_model(self.model), mode="exact", summarizer=self.summarizer,
                             cache_pricing=CachePricing.of_session(header))
        self._ctx = ToolContext.from_policy(self._workspace, self.session_id, self.policy, env=self._tool_env,
                                            sandbox=self.sandbox)
        self._store = MemoryStore(root, max_lines=self.policy.memory_max_lines)
        ledger = self._store.ledger     # what its scribe writes while a command runs is not the command's
        self._guard = StateGuard(root, self.log,
                                 lambda rel, now: rel == f"{STATE_DIR}/{ledger.name}" and now == ledger.mark)

    def _begin(self, root: Path, scrubbed: list[str]) -> None:
        """The first entries of the log: the system prompt (with the project history), notes."""
        history, history_error = "", None
        try:
            history = project_history(root, self.policy.project_history_entries,
                                      self.policy.project_history_max_tokens)
        except OSError as exc:
            history_error = f"cannot read PROJECT_MEMORY.md: {exc.strerror or exc}"
        system = system_prompt(self.static, session_context(self.session_id, str(root), self.model, history))
        self._append(Message(self.log.next_message_id(), "system", system, turn=0, meta={"ts": utc_now()}))
        self._note({"kind": "sandbox", "sandbox": self.sandbox.kind, "network": self.sandbox.network,
                    **(self.sandbox.shown(root) if self.sandbox.kind == "bwrap" else {}),
                    "notice": self.sandbox.notice, "undumpable": self.sandbox.undumpable})
        if scrubbed:
            self._note({"kind": "environment", "removed": scrubbed,
                        "why": "they hold the API key; tools run without them"})
        if history:
            self._note({"kind": "project_history",
                        "sessions": len(re.findall(r"^(?:> )?## Session ", history, re.MULTILINE))})
        if history_error:
            self._error({"kind": "memory", "message": history_error}, notify=True)
        self._scribe = Scribe(self._store, every_turns=self.policy.scribe_every_turns)

    async def _discover_model(self) -> str:
        try:
            page = await self._client.models.list()
        except openai.APIError as exc:
            raise AgentError(f"no model configured, and listing the endpoint's models failed: "
                             f"{classify(exc).message}") from None
        ids = [m.id for m in page.data if getattr(m, "id", None)]
        if not ids:
            raise AgentError("no model configured, and the endpoint lists none; pass --model")
        return ids[0]

    async def close(self) -> None:
        """End the session: flush the scribe, append the session to PROJECT_MEMORY.md, close files."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        try:
            await self._write_memory()
        finally:
            self.log.close()
            await self._client.close()
            self._summary_client.close()

    async def _write_memory(self) -> None:
        pending = self._scribe_pending()
        if pending:
            self._scribe.offer(self.pipe.turn, pending)
        finished = await asyncio.to_thread(self._scribe.close, SCRIBE_CLOSE_S)
        if not finished or self._scribe.failures:
            self._error({"kind": "memory", "message": f"the scribe failed to write memory: "
                                                      f"{self._scribe.last_error or 'it did not finish in time'}"},
                        notify=True)
        if not any(isinstance(e, Message) and e.role == "user" for e in self.log.entries):
            return
        summary = self.redact(self.session_summary())
        try:
            await asyncio.to_thread(append_session, self.workspace, self.session_id, summary)
            report = await asyncio.to_thread(
                consolidate, self._store, threshold=self.policy.memory_fragments_threshold,
                cooldown_days=self.policy.memory_gc_cooldown_days)
        except Exception as exc:  # noqa: BLE001 - memory is an aid; the session itself is done
            self._error({"kind": "memory", "message": f"writing project memory failed: {type(exc).__name__}: {exc}"},
                        notify=True)
            return
        self._note({"kind": "session_end", "project_memory": "PROJECT_MEMORY.md", "summary_chars": len(summary),
                    "consolidation": report.describe(), "scribe_written": self._scribe.written,
                    "scribe_skipped": self._scribe.skipped})

    def session_summary(self) -> str:
        """What PROJECT_MEMORY.md keeps of this session: the latest deep summary, else an
        extractive one; capped so that several sessions fit the project-history budget."""
        p = self.policy
        limit = max(400, p.project_history_max_tokens * 4 // max(1, p.project_history_entries))
        compactions = [e for e in self.log.entries if isinstance(e, Event) and e.type == "compaction"]
        messages = [e for e in self.log.entries if isinstance(e, Message) and e.role != "system"
                    and not (e.meta or {}).get("partial")]
        if compactions:
            text = str(compactions[-1].get("summary") or "")
            if self.last_answer.strip():
                text += "\n- Final answer: " + one_line(self.last_answer, 300)
        else:
            text = ExtractiveSummarizer().summarize(messages, None, p).text
        if len(text) > limit:
            text = text[: limit - 2].rsplit("\n", 1)[0] + "\n…"
        return text

    # -- the loop ------------------------------------------------------------------------------------
    async def send(self, text: str, *, max_steps: int | None = None) -> str:
        """Run the loop for one user message; return the model's final answer."""
        if not text.strip():
            raise AgentError("the prompt is empty")
        try:
            await self.start()
        except AgentError as exc:
            raise AgentError(self.redact(str(exc))) from None  # it may quote a server that echoes the key
        if self._closed:
            raise AgentError("the session is closed")
        max_steps = max_steps or self.config.max_steps
        async with self._turn_lock:
            try:
                return await self._run_turn(text, max_steps)
            except AgentError as exc:
                error = AgentError(self.redact(str(exc)), self.path)
                self._emit("error", text=str(error))
                raise error from None

    async def _run_turn(self, text: str, max_steps: int) -> str:
        self._append(Message(self.log.next_message_id(), "user", text, turn=self.pipe.turn + 1,
                             meta={"ts": utc_now()}))
        retrieval = asyncio.create_task(retrieve_within(self._store, text, self.policy.retrieval_timeout_s,
                                                        k=self.policy.retrieval_top_k))
        try:
            for step in range(max_steps):
                reply, calls = await self._step(retrieval if step == 0 else None)
                self.steps += 1
                if not calls:
                    self.last_answer = reply.text
                    self._feed_scribe()
                    self._emit("final", text=reply.text)
                    return reply.text
                await self._run_tools(calls)
                self._feed_scribe()
        finally:
            if not retrieval.done():
                retrieval.cancel()
        self._error({"kind": "max_steps", "message": f"stopped after {max_steps} steps without a final answer"})
        raise AgentError(f"stopped after {max_steps} steps without a final answer (raise --max-steps)")

    async def _step(self, retrieval: asyncio.Task | None) -> tuple[Reply, list[ToolCall]]:
        """One model request, with compaction before it and the retry rules around it."""
        failures = 0
        forced = False
        view, _ = await self._prepare(None)
        if retrieval is not None:
            await self._set_volatile(retrieval)
        while True:
            sent, request = self._build_request(view)
            turn = self.pipe.turn + 1
            self._emit("request", view=view, turn=turn)
            acc = Assembler(lambda piece: self._emit("text", text=piece, turn=turn))
            try:
                reply = await stream_chat(self._client, model=self.model, messages=request, tools=self.tools,
                                          assembler=acc, deadlines=self._deadlines, **self.request_params())
            except asyncio.CancelledError:
                self._append_partial(acc.reply(), "cancelled")
                raise
            except StreamCut as cut:
                failures += 1
                cut_logged = self._append_partial(cut.partial, cut.reason)
                failure = classify(cut)
                await self._retry_or_raise(failure, failures, turn)
                if cut_logged:
                    # the partial reply is an assistant message of the log: replay plans again
                    # after it, so the live loop does too
                    view, _ = await self._prepare(None)
                continue
            except openai.APIError as exc:
                failure = classify(exc)
                if failure.kind == CONTEXT_LENGTH:
                    # the provider names its window: smaller than the session's, it is the one to keep to
                    learned = failure.window if failure.window and failure.window < view.window else None
                    event = self._error({"kind": "context_length", "turn": turn, "status": failure.status,
                                         "code": failure.code, "message": failure.message,
                                         "sent_tokens": view.sent_tokens, "window": view.window,
                                         **({"provider_window": learned} if learned else {}),
                                         "action": "retry after a deep compaction" if not forced else "give up"})
                    if forced:
                        raise AgentError(f"the provider rejected the request as too long even after a deep "
                                         f"compaction ({failure.message})") from None
                    forced = True
                    rejected = view.sent_tokens
                    said = f"{failure.message}; compacting"
                    if learned:
                        said = self._learn_window(learned, view.window, failure.message)
                    self._emit("retry", event=event, text=said, turn=turn)
                    view, comp = await self._prepare("context_length")
                    if comp is None and not (learned and view.sent_tokens < rejected):
                        why = ("the summary was declined" if self.last_review is not None
                               else "there is nothing left to compact")
                        raise AgentError(f"the provider rejected the request as too long and {why} "
                                         f"({failure.message})") from None
                    continue
                failures += 1
                await self._retry_or_raise(failure, failures, turn)
                continue
            return reply, self._record_reply(reply, sent, turn)

    def _learn_window(self, window: int, was: int, message: str) -> str:
        """Keep to the window the provider named from here on: logged as a `config` event, which the
        pipeline (live and replayed) plans under; what to tell the user."""
        self._append(Event("config", self.log.next_event_id(),
                           {"window": window, "was": was, "reason": f"the provider's context-length error: {message}"}))
        if getattr(self.summarizer, "model", None) == self.model and hasattr(self.summarizer, "window"):
            self.summarizer.window = min(self.summarizer.window, window)   # the same model summarizes
        return f"the provider's context window is {window:,} tokens, not {was:,}: the session keeps to it from now on"

    def request_params(self) -> dict[str, Any]:
        """Extra chat-completions parameters for the next request (None values are left out)."""
        return {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}

    async def _retry_or_raise(self, failure: Failure, failures: int, turn: int) -> None:
        cfg = self.config
        data: dict[str, Any] = {"kind": _failure_kind(failure), "turn": turn, "message": failure.message,
                                "attempt": failures}
        if failure.status is not None:
            data["status"] = failure.status
        patience = max(cfg.retry_cap_s, MAX_RETRY_AFTER_S)
        too_long = failure.retry_after is not None and failure.retry_after > patience
        if too_long:
            data["retry_after_s"] = failure.retry_after
            failure = Failure(failure.kind, f"{failure.message} (the server asks to wait "
                                            f"{failure.retry_after:g} s, more than {patience:g} s)", failure.status)
        if failure.kind != TRANSIENT or failures > cfg.max_retries or too_long:
            data["action"] = "give up"
            self._error(data)
            if failure.kind == TRANSIENT and not too_long:
                raise AgentError(f"gave up after {failures} failed attempts: {failure.message}") from None
            raise AgentError(failure.message) from None
        delay = backoff_delay(failures, cfg.retry_base_s, cfg.retry_cap_s, failure.retry_after)
        data["retry_in_s"] = round(delay, 3)
        if failure.retry_after is not None:
            data["retry_after_s"] = failure.retry_after
        event = self._error(data)
        self._emit("retry", event=event, text=failure.message, turn=turn)
        await asyncio.sleep(delay)

    async def _prepare(self, force_deep: str | None) -> tuple[View, Compaction | None]:
        """The pipeline's view for the next request (a deep compaction may happen here, shown
        first to the reviewer when one is attached)."""
        async with self._pipe_lock:
            previous = self.last_view
            job = asyncio.ensure_future(asyncio.to_thread(self.pipe.view, force_deep))
            try:
                view, comp = await asyncio.shield(job)
            except asyncio.CancelledError:
                # the plan goes on in its thread: nothing may touch the pipeline before it ends,
                # and a compaction it applies must be logged or replay would disagree
                view, comp = await job
                self._log_plan(comp)
                raise
            self.last_review = None
            if comp is not None and self.review is not None:
                view, comp = await self._review(view, comp, previous)
            else:
                self._log_plan(comp)
        self.last_view = view
        return view, comp

    async def _review(self, view: View, comp: Compaction, previous: View | None) -> tuple[View, Compaction | None]:
        """Show the proposed compaction and do what the user decides (see core/review.py)."""
        proposal = SummaryProposal.of(comp, view, previous)
        try:
            decision = self.review(proposal)
            if inspect.isawaitable(decision):
                decision = await decision
        except asyncio.CancelledError:
            self.pipe.withdraw(comp.id)   # nobody decided: the session stays as it was
            self._log_plan(None)
            raise
        except Exception as exc:  # noqa: BLE001 - a broken reviewer must not lose the compaction
            self._error({"kind": "review", "message": f"the summary review failed ({type(exc).__name__}: {exc}); "
                                                      f"the compaction was applied as proposed"}, notify=True)
            decision = SummaryDecision("accept")
        self.last_review = decision
        if decision.action == "accept":
            self._log_plan(comp)
            return view, comp
        if decision.action == "edit":
            edited = self.pipe.replace_summary(comp.id, decision.text)
            edited = replace(edited, tokens_after=max(0, comp.tokens_after + heuristic_text(decision.text)
                                                      - heuristic_text(comp.summary)))
            view, _ = await asyncio.to_thread(self.pipe.view, None)
            self._log_plan(edited, reviewed="edited")
            return view, edited
        if comp.trigger == "manual":
            self.pipe.withdraw(comp.id)
            self._log_plan(None)
            return previous or view, None
        # an automatic compaction the user declined: logged with its undo, so replay agrees
        self._log_plan(comp, reviewed="declined")
        self._append(Event("undo", self.log.next_event_id(), {"target": comp.id,
                                                               "reason": "the user declined the summary"}))
        view, _ = await asyncio.to_thread(self.pipe.view, None)
        return view, None

    def _log_plan(self, comp: Compaction | None, reviewed: str | None = None) -> None:
        """Log what planning decided: the compaction (already applied) and how the summary went."""
        outcomes = self.summarizer.take_outcomes()
        if comp is not None:
            event = comp.to_event()
            failed = [o for o in outcomes if not o.ok]
            extra = {"reason": failed[-1].reason} if failed else {}
            if reviewed:
                extra["reviewed"] = reviewed
            if extra:
                event = Event(event.type, event.id, {**event.data, **extra})
            self._append(event, feed=False)
            self._emit("compaction", event=event)
        for o in outcomes:
            data = {"kind": "summary", "summarizer": o.summarizer, "model": o.model, "calls": o.calls,
                    "seconds": o.seconds, "prompt_tokens": o.prompt_tokens, "completion_tokens": o.completion_tokens}
            if o.ok:
                self._note(data)
            else:
                self._error({**data, "message": o.reason, "fallback": "extractive"}, notify=True)

    async def _set_volatile(self, retrieval: asyncio.Task) -> None:
        """The per-turn layer: date, working directory and what retrieval found in time."""
        hits = await retrieval   # never raises: a slow or failing search gives None
        injected = format_injection(hits or [])
        if hits is None:
            self._note({"kind": "retrieval", "hits": 0, "timed_out": True,
                        "timeout_s": self.policy.retrieval_timeout_s})
        elif hits:
            self._note({"kind": "retrieval", "hits": len(hits), "sources": sorted({h.source for h in hits}),
                        "injected": injected})
        self._volatile = volatile_context(datetime.now().strftime("%Y-%m-%d"), str(self.workspace), injected)

    def _build_request(self, view: View) -> tuple[list[Message], list[dict[str, Any]]]:
        """The messages sent (the view plus the volatile layer), checked before anything is sent.

        The layer goes in front of a user message the first time it is sent and stays as it was
        sent, so each request only changes at its end (the provider's prompt cache holds)."""
        if not view.fits:
            self._over_window(view.sent_tokens, view.window)
        latest = next((m.id for m in reversed(view.messages) if m.role == "user"), None)
        volatile = self._sent_with.get(latest, self._volatile) if latest else self._volatile
        sent = with_volatile(view.messages, volatile, self._sent_with)
        tokens = self.pipe.count(sent)[0]
        if tokens > view.window and latest not in self._sent_with and f"\n\n{RETRIEVED_HEADER}" in volatile:
            volatile = volatile.split(f"\n\n{RETRIEVED_HEADER}", 1)[0]
            self._note({"kind": "retrieval", "dropped": "the retrieved memory would not fit the window"})
            self._volatile = volatile
            sent = with_volatile(view.messages, volatile, self._sent_with)
            tokens = self.pipe.count(sent)[0]
        if tokens > view.window:
            self._over_window(tokens, view.window)
        request = [m.to_api() for m in sent]
        problems = api_problems(request)
        if problems:
            self._error({"kind": "internal", "message": "the pipeline produced an invalid request",
                         "problems": problems[:10]})
            raise AgentError(f"internal error: the pipeline produced an invalid request ({problems[0]})")
        if latest and volatile:
            self._sent_with.setdefault(latest, volatile)
        return sent, request

    def _over_window(self, tokens: int, window: int) -> None:
        message = f"the request needs {tokens} tokens, over the window of {window}; not sent"
        self._error({"kind": "window", "message": message, "sent_tokens": tokens, "window": window})
        raise AgentError(f"the request needs {tokens} tokens, over the window of {window}; "
                         f"a request that exceeds the window is never sent")

    def _record_reply(self, reply: Reply, sent: list[Message], turn: int) -> list[ToolCall]:
        calls = self._unique_calls(reply.tool_calls, turn)
        meta: dict[str, Any] = {"ts": utc_now(), "finish_reason": reply.finish_reason}
        if reply.model and reply.model != self.model:
            meta["model"] = reply.model
        self._append(Message(self.log.next_message_id(), "assistant", reply.text, tuple(calls), turn=turn,
                             meta=meta))
        if reply.usage is not None:
            event = self._append(Event("usage", self.log.next_event_id(), {
                "turn": turn, "prompt_tokens": reply.usage["prompt_tokens"],
                "completion_tokens": reply.usage["completion_tokens"], "estimate": heuristic_messages(sent)}))
            self._emit("usage", event=event, turn=turn)
        if reply.empty:
            self._note({"kind": "empty_reply", "turn": turn, "finish_reason": reply.finish_reason})
        return calls

    def _unique_calls(self, calls: list[ToolCall], turn: int) -> list[ToolCall]:
        """Tool call ids as the server gave them, unless empty, already used in this session (llama.cpp
        and others repeat them) or too long to send back (a 1 MB id was); those get call_<turn>_<k>."""
        out = []
        for k, c in enumerate(calls):
            cid = c.id
            if not cid or cid in self._call_ids or len(cid) > MAX_CALL_ID_CHARS:
                cid = f"call_{turn}_{k}"
                n = 1
                while cid in self._call_ids:
                    n += 1
                    cid = f"call_{turn}_{k}_{n}"
            self._call_ids.add(cid)
            out.append(c if cid == c.id else ToolCall(cid, c.name, c.arguments))
        return out

    def _append_partial(self, partial: Reply, reason: str) -> bool:
        """Log what a broken stream delivered, marked partial (never sent again); True if anything came."""
        if partial.empty:
            return False
        calls = [ToolCall(c.id or f"partial_{self.pipe.turn + 1}_{k}", c.name, c.arguments)
                 for k, c in enumerate(partial.tool_calls)]
        self._append(Message(self.log.next_message_id(), "assistant", partial.text, tuple(calls),
                             turn=self.pipe.turn + 1,
                             meta={"ts": utc_now(), "partial": True, "error": one_line(reason)}))
        return True

    # -- tools ----------------------------------------------------------------------------------------
    async def _run_tools(self, calls: list[ToolCall]) -> None:
        """Ask for approvals one by one, then run the approved calls concurrently; each result is
        logged as it finishes."""
        turn = self.pipe.turn + 1
        approved: list[ToolCall] = []
        for call in calls:
            self._emit("tool_start", call=call, turn=turn)
            allowed, why = await self._decide(call)
            if allowed:
                approved.append(call)
            else:
                self._finish_tool(call, denied_result(call, why), turn)

        async def run(call: ToolCall) -> None:
            result = await asyncio.to_thread(self._execute, call)
            self._finish_tool(call, result, turn)

        await asyncio.gather(*(run(c) for c in approved))

    async def _decide(self, call: ToolCall) -> tuple[bool, str]:
        if not needs_approval(call.name) or self.config.auto_approve:
            return True, ""
        if self.approve is None:
            return False, "nobody was there to approve it (not a terminal, and --yes was not given)"
        if inspect.iscoroutinefunction(self.approve):
            answer = await self.approve(call)
        else:
            answer = await asyncio.to_thread(self.approve, call)
            if inspect.isawaitable(answer):
                answer = await answer
        return (True, "") if answer else (False, "the user declined it")

    def _execute(self, call: ToolCall) -> ToolResult:
        # a command run without bubblewrap can write Breakwater's own state: checked after it (state_guard.py)
        before = self._guard.before() if call.name == "bash" else None
        result = execute_tool(call.name, call.arguments, self._ctx, call.id)
        spill = result.meta.get("spill")
        if spill and self.redact.secret:
            try:
                folder, _, name = spill.rpartition("/")
                found = self.redact.scrub_file(OwnedDir(self._workspace.root, folder), name)
            except OSError as exc:
                result = ToolResult(result.content, {**result.meta, "redaction_error": str(exc)})
            else:
                if found:
                    result = ToolResult(result.content, {**result.meta, "redacted": found})
        if before is not None:
            result = self._guard.after(result, before)
        return result

    def _finish_tool(self, call: ToolCall, result: ToolResult, turn: int) -> None:
        self._append(Message(self.log.next_message_id(), "tool", result.content, tool_call_id=call.id,
                             name=call.name, turn=turn, meta={"ts": utc_now(), "source": result.meta}))
        self._emit("tool_end", call=call, result=result, turn=turn)
        if result.meta.get("state_changed"):    # the person is told as well as the model
            self._error({"kind": "state", "message": result.meta["state_changed"].strip("[]")}, notify=True)

    # -- memory ---------------------------------------------------------------------------------------
    def _scribe_pending(self) -> list[Message]:
        return [e for e in self.log.entries[self._scribe_from:]
                if isinstance(e, Message) and e.role != "system" and not (e.meta or {}).get("partial")]

    def _feed_scribe(self) -> None:
        """Offer the messages since the last accepted snapshot; never waits (a full queue skips)."""
        at_soft = self.last_view is not None and self.last_view.zone != "safe"
        end = len(self.log.entries)
        pending = self._scribe_pending()
        if pending and self._scribe.maybe_offer(self.pipe.turn, pending, at_soft_limit=at_soft):
            self._scribe_from = end

    # -- controls for the workbench ------------------------------------------------------------------
    async def add_event(self, type: str, data: Mapping[str, Any]) -> Event:
        """Record a control event (trigger, undo, pin, unpin, config, note); the next request obeys it."""
        await self.start()
        async with self._pipe_lock:
            return self._append(Event(type, self.log.next_event_id(), dict(data)))

    async def compact_now(self) -> Compaction | None:
        """A manual deep compaction, logged like any other (shown to the reviewer first, when one is
        attached); None if there is nothing to summarize or the user cancelled it."""
        await self.start()
        _, comp = await self._prepare("manual")
        return comp

    # -- log and events -------------------------------------------------------------------------------
    def _append(self, entry: Message | Event, feed: bool = True):
        try:
            entry = self.log.append(self._redacted(entry))
        except LogWriteError as exc:
            # a full disk: the log keeps every entry written whole before this one; run and chat stop
            raise AgentError(f"{exc.strerror}; the run stopped, and the log ends with the last entry written whole",
                             self.path) from None
        if feed:
            self.pipe.feed(entry)
        if isinstance(entry, Message):
            self._emit("message", message=entry, turn=entry.turn)
        return entry

    def _redacted(self, entry: Message | Event) -> Message | Event:
        if not self.redact.found(json.dumps(entry.to_record(), ensure_ascii=False)):
            return entry
        if isinstance(entry, Event):
            return Event(entry.type, entry.id, json.loads(self.redact(json.dumps(dict(entry.data), ensure_ascii=False))))
        meta = json.loads(self.redact(json.dumps(dict(entry.meta), ensure_ascii=False))) if entry.meta else entry.meta
        calls = tuple(ToolCall(c.id, c.name, self.redact(c.arguments)) for c in entry.tool_calls)
        return Message(entry.id, entry.role, self.redact(entry.content), calls, entry.tool_call_id, entry.name,
                       entry.turn, meta)

    def _note(self, data: Mapping[str, Any]) -> Event:
        return self._append(Event("note", self.log.next_event_id(), dict(data)))

    def _error(self, data: Mapping[str, Any], notify: bool = False) -> Event:
        """Log an error event; `notify` also tells the watcher (errors that end the run reach it
        through `send`, retries as "retry" events)."""
        event = self._append(Event("error", self.log.next_event_id(), dict(data)))
        if notify:
            self._emit("error", event=event, text=str(data.get("message") or data.get("kind")))
        return event

    def _emit(self, kind: str, *, turn: int | None = None, **fields: Any) -> None:
        """Tell the watcher; what it may print passes through the same redaction as the log."""
        if self.on_event is None:
            return
        if turn is None:
            turn = self.pipe.turn + 1 if self.pipe is not None else 0
        if self.redact.secret is not None:
            if fields.get("text"):
                fields["text"] = self.redact(fields["text"])
            call = fields.get("call")
            if call is not None and self.redact.found(call.arguments):
                fields["call"] = ToolCall(call.id, call.name, self.redact(call.arguments))
            result = fields.get("result")
            if result is not None and self.redact.found(result.content):
                fields["result"] = ToolResult(self.redact(result.content), result.meta)
        self.on_event(AgentEvent(kind, turn, **fields))


def _failure_kind(failure: Failure) -> str:
    for prefix, kind in _CUT_KINDS:
        if failure.message.startswith(prefix):
            return kind
    if failure.status == 429:
        return "rate_limit"
    if failure.status is not None and failure.status >= 500:
        return "server_error"
    if failure.status is None and failure.kind == TRANSIENT:
        return "connection"
    return "api_error"


_CUT_KINDS = (("stream cut", "stream_cut"), ("stream stalled", "stalled"), ("request deadline", "deadline"))


async def run_agent(config: AgentConfig, prompt: str, *, policy: Policy | None = None,
                    approve: Approver | None = None, on_event: EventCallback | None = None,
                    max_steps: int | None = None) -> RunResult:
    """One prompt, headless: run until the final answer, then close the session."""
    session = AgentSession(config, policy=policy, approve=approve, on_event=on_event)
    try:
        answer = await session.send(prompt, max_steps=max_steps)
    finally:
        await session.close()
    return RunResult(answer, session.path, session.session_id, session.steps)


__all__ = ["AgentError", "AgentSession", "RunResult", "run_agent", "resolve_policy", "session_file_name"]
