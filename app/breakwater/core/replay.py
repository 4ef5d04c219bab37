"""A recorded session replayed under one policy: every turn's figures, and the exact request of
any turn — what `simulate --view K` prints — cheaply enough to jump around interactively.

Folding the log from the start costs O(history) per request (≈1 s at the end of 5,000
messages). So the one pass that simulates every turn also keeps a checkpoint of the pipeline
every few turns (`Pipeline.snapshot()`: its containers copied, the messages in them shared); a
jump copies the nearest checkpoint at or before the turn and folds forward from there. Stepping
forward carries on with the pipeline the last jump left. The few turns before a fold's target are
kept ready — a copy of the pipeline before each, or their views when the user is stepping back —
and so are those before the turn on screen when the whole log is simulated (`run(focus=…)`), so a
step back costs one request at most. Stepping back past them, a fold from a checkpoint also keeps
the pipeline where the next few such folds will start (stepping stones), so most of them fold a
few turns, not the hundreds between checkpoints of a long session. A checkpoint holds only the
pipeline's own lists of references and numbers, never a second copy of the history.

The workbench draws from this object; part 2 (tuning) builds a new `Replay` with another policy
(`with_policy`), part 3 (live chat) appends entries (`append`) and re-runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Callable

from breakwater.core.log.edits import KINDS, Covered, Edit, Edits, View
from breakwater.core.log.message import Message
from breakwater.core.fold.pipeline import Compaction, Pipeline
from breakwater.core.policy import Policy
from breakwater.core.log.session_log import Entry, SessionLog
from breakwater.core.simulate import Simulation, TurnStats, make_pipeline, simulate, token_counter
from breakwater.core.log.accounting import Calibration
from breakwater.core.log.tokens import TokenCounter, heuristic_message

CHECKPOINTS = 96        # at most this many per session: a jump folds ≤ turns/96 turns
MIN_SPACING = 16        # but not closer than this: small sessions need few
CHECKPOINT_BYTES = 96_000_000   # and all of them together about this big (a long session gets fewer)
BYTES_PER_MESSAGE = 320         # what one message of history costs a snapshot (its slots in ~20 lists and dicts)
VIEW_CACHE = 24         # recent views kept for stepping back and forth
TRAILING_VIEWS = 6      # a fold also prepares this many turns before its target, for stepping back
STEPPING_STONES = 3     # stepping back, a fold from a checkpoint also keeps the pipeline where the next few
                        # such folds start, so only one in this many + 1 folds from the checkpoint


@dataclass(frozen=True, slots=True)
class Summary:
    """The deep-compaction summary a request carries, and the log messages it stands for.
    `message` is what is sent: the summary, possibly joined with the first user message."""

    message: Message
    compaction: Compaction | None
    covered: tuple[str, ...]
    ranges: tuple[Covered, ...] = ()   # the request's summarized ranges: `covers` without a scan

    def covers(self, message_id: str) -> bool:
        return any(r.covers(message_id) for r in self.ranges)


class EditsById(Mapping[str, list[Edit]]):
    """A request's edits by message id, each message's in the request's order: the edits the
    request holds one by one are grouped once, the covered ranges are looked up by position, so
    a step at 20,000 messages does not group 20,000 summarized edits."""

    __slots__ = ("_edits", "_parts")

    def __init__(self, edits: Edits):
        self._edits = edits
        parts: list[Covered | dict[str, list[Edit]]] = []
        for part in edits.parts:
            if isinstance(part, Covered):
                parts.append(part)
                continue
            grouped: dict[str, list[Edit]] = {}
            for e in part:
                got = grouped.get(e.message_id)
                if got is None:
                    grouped[e.message_id] = [e]
                else:
                    got.append(e)
            parts.append(grouped)
        self._parts = parts

    def get(self, message_id: str, default=None):
        got: list[Edit] = []
        for part in self._parts:
            if isinstance(part, Covered):
                got += part.edits_of(message_id)
            else:
                got += part.get(message_id, ())
        return got or default

    def __getitem__(self, message_id: str) -> list[Edit]:
        got = self.get(message_id)
        if got is None:
            raise KeyError(message_id)
        return got

    def __contains__(self, message_id: object) -> bool:
        return any(part.covers(message_id) if isinstance(part, Covered) else message_id in part
                   for part in self._parts)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(e.message_id for e in self._edits))

    def __len__(self) -> int:
        return len(dict.fromkeys(e.message_id for e in self._edits))


@dataclass(slots=True)
class TurnDetail:
    """One request as the workbench draws it: the view, plus per-message look-ups."""

    view: View
    edits_by_id: EditsById
    sent_by_id: dict[str, Message]
    summary: Summary | None
    history: int          # how many log messages the request's history holds (the rest are later)
    heuristic_tokens: int  # the sent request by the plain heuristic (SPEC §2), before calibration
    exact_tokens: int | None  # by tiktoken, when the model's encoding is known
    encoding: str | None
    calibration: Calibration  # the accounting fit in force at this request (core/log/accounting.py)
    window_source: str = "policy"   # where the window came from (core/log/models.py)
    counter: str = "exact"          # the counter asked for: with "heuristic" no exact count is made
    # sent message id -> the ids joined into it so that turns alternate (the summary, a user message)
    joined: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def kinds(self, message_id: str) -> list[str]:
        """The edit kinds applied to a message, in the canonical order, each once; a message others
        were joined into counts as merged too (its edit is the absorbed message's)."""
        got = {e.kind for e in self.edits_by_id.get(message_id, ())}
        if message_id in self.joined:
            got.add("merged")
        return [k for k in KINDS if k in got] + sorted(got.difference(KINDS))

    def sent_tokens(self, msg: Message) -> int:
        """Estimated tokens of a message as sent (0 when it was dropped, summarized or merged away)."""
        sent = self.sent_by_id.get(msg.id)
        return heuristic_message(sent) if sent is not None else 0


@dataclass
class _Checkpoint:
    turn: int           # the request planned right after this state
    index: int          # position in log.entries of the assistant message that request produced
    state: Pipeline     # never fed: a jump folds forward from a snapshot of it


@dataclass
class Replay:
    """`log` under `policy`; call `run()` once (slow: in a worker), then `detail(turn)` at will."""

    log: SessionLog
    policy: Policy
    counter: str = "exact"
    model: str | None = None
    summarizer: object | None = None
    simulation: Simulation | None = None
    recording: SessionLog | None = None   # the file as recorded, when `log` has an overlay merged in
    tokens: TokenCounter | None = None    # shared with `with_policy`: text counted once stays counted
    window_source: str = "policy"         # where the policy's window came from (core/log/models.py)
    _checkpoints: list[_Checkpoint] = field(default_factory=list, repr=False)
    _views: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _live: tuple[int, Pipeline, int] | None = field(default=None, repr=False)
    # pipelines just before the few turns preceding the last fold's target: (state, entry index)
    _near: dict[int, tuple[Pipeline, int]] = field(default_factory=dict, repr=False)
    _last_turn: int = field(default=0, repr=False)
    _compactions: dict[str, Compaction] | None = field(default=None, repr=False)
    _history: list[int] = field(default_factory=list, repr=False)
    # by kind, the last range of whole messages looked up by id: the next request's is mostly the same
    _indexed: dict[str, Covered] = field(default_factory=dict, repr=False)

    # -- the pass over the whole log -------------------------------------------------------------
    def run(self, progress: Callable[[int, int], None] | None = None, focus: int | None = None) -> Simulation:
        """Simulate every turn (the numbers `simulate --json` prints) and keep checkpoints. The
        request of turn `focus` (the one on screen) is built in the same pass, and the turns just
        before it are kept ready, so showing it and stepping back from it cost no second fold."""
        total = self.log.turn_count()
        # checkpoints spread evenly hold half the history each on average
        affordable = max(1, 2 * CHECKPOINT_BYTES // (BYTES_PER_MESSAGE * max(1, len(self.log.entries))))
        spacing = max(MIN_SPACING, -(-total // min(CHECKPOINTS, affordable)))
        checkpoints: list[_Checkpoint] = []
        near: dict[int, tuple[Pipeline, int]] = {}
        focused: list[Calibration] = []

        def before_turn(pipe: Pipeline, index: int) -> None:
            turn = pipe.turn + 1
            if (turn - 1) % spacing == 0:
                checkpoints.append(_Checkpoint(turn, index, pipe.snapshot()))
            if focus is not None and focus - TRAILING_VIEWS <= turn <= focus:
                if turn == focus:
                    focused.append(replace(pipe.calibration))
                else:
                    near[turn] = (pipe.snapshot(), index)
            if progress is not None and turn % 64 == 0:
                progress(turn, total)

        tokens = self._tokens()
        sim = simulate(self.log, self.policy, self.counter, self.model, self.summarizer,
                       views=() if focus is None else (focus,), before_turn=before_turn, tokens=tokens,
                       window_source=self.window_source)
        with self._lock:
            self.simulation = sim
            self._checkpoints = checkpoints
            self._views.clear()
            self._live = None
            self._near = near
            self._compactions = None
            self._history = []
            view = sim.views.pop(focus, None)
            if view is not None:
                self._keep(focus, view, focused[0], tokens)
        return sim

    @property
    def turns(self) -> int:
        """The recorded requests; turn `turns + 1` is the request that would come next."""
        return len(self.simulation.turns) if self.simulation else self.log.turn_count()

    def stats(self, turn: int) -> TurnStats | None:
        if self.simulation is None or not 1 <= turn <= len(self.simulation.turns):
            return None
        return self.simulation.turns[turn - 1]

    def compactions(self) -> dict[str, Compaction]:
        """Every deep compaction known: the ones recorded in the log and the ones this policy made."""
        if self._compactions is None:
            out = {e.id: Compaction.from_event(e) for e in self.log.events if e.type == "compaction"}
            if self.simulation:
                out.update((c.id, c) for c in self.simulation.compactions)
            self._compactions = out
        return self._compactions

    # -- one request -----------------------------------------------------------------------------
    def view(self, turn: int) -> View:
        """Exactly `view_at(log, policy, turn, counter, model)`, from the nearest checkpoint."""
        return self._fold(turn)[0]

    def _fold(self, turn: int) -> list:
        turn = max(1, min(turn, self.turns + 1))
        with self._lock:
            stepping_back, self._last_turn = turn == self._last_turn - 1, turn
            hit = self._views.get(turn)
            if hit is not None:
                self._views.move_to_end(turn)
                return hit
            entries = self.log.entries
            # the nearest state at or before the turn: a pipeline kept ready, the one the last fold
            # left (stepping forward costs one turn: it has planned request live[0], whose assistant
            # message is entries[live[2]]), a checkpoint, or the start
            start = max((cp for cp in self._checkpoints if cp.turn <= turn), key=lambda cp: cp.turn, default=None)
            ready = max((t for t in self._near if t <= turn), default=0)
            live = self._live if self._live is not None and self._live[0] < turn else None
            # the closest wins; at a tie, the one that needs no copy
            best = max((start.turn if start else 0, 0), (live[0] if live else 0, 1), (ready, 2))
            if best[0] == 0:
                pipe = make_pipeline(self.log, self.policy, self.counter, self.model, self.summarizer, self._tokens())
                i = 0
            elif best[1] == 2:
                pipe, i = self._near.pop(ready)
            elif best[1] == 1:
                _, pipe, i = live
                pipe.feed(entries[i])
                i += 1
            else:
                pipe, i = start.state.snapshot(), start.index
            if pipe.turn + 1 < turn - TRAILING_VIEWS:
                self._near = {}   # a fold from further back prepares the turns before this one afresh
            # where the next folds stepping back will start: K+1 turns apart, each K before its target
            stones = {j * (TRAILING_VIEWS + 1) + TRAILING_VIEWS for j in range(1, STEPPING_STONES + 1)} \
                if stepping_back and pipe.turn + 1 < turn - 2 * TRAILING_VIEWS - 1 else set()
            while i < len(entries):
                entry = entries[i]
                if isinstance(entry, Message) and entry.role == "assistant":
                    if pipe.turn + 1 == turn:
                        break
                    if turn - (pipe.turn + 1) in stones:
                        self._near[pipe.turn + 1] = (pipe.snapshot(), i)
                    if turn - (pipe.turn + 1) <= TRAILING_VIEWS:
                        if stepping_back:   # the next steps back are likely: have their requests ready
                            plan = pipe.plan()
                            self._keep(plan.turn, plan.built or pipe.materialize(plan), pipe.calibration, pipe.counter)
                            pipe.feed(entry)
                            i += 1
                            continue
                        self._near[pipe.turn + 1] = (pipe.snapshot(), i)   # a copy costs less than a request
                    pipe.plan()
                pipe.feed(entry)
                i += 1
            calibration = replace(pipe.calibration)
            view, _ = pipe.view()
            self._live = (turn, pipe, i) if i < len(entries) else None
            return self._keep(turn, view, calibration, pipe.counter)

    @property
    def counter_in_effect(self) -> str:
        """"exact" or "heuristic": the counter asked for, unless the model has no tokenizer here."""
        return self._tokens().in_effect(self.counter)

    def _tokens(self) -> TokenCounter:
        if self.tokens is None:
            self.tokens = token_counter(self.log, self.counter, self.model)
        return self.tokens

    def _keep(self, turn: int, view: View, calibration: Calibration, counter: TokenCounter) -> list:
        """[view, calibration in force, counter, its TurnDetail once asked for]."""
        got = self._views[turn] = [view, replace(calibration), counter, None]
        self._views.move_to_end(turn)
        while len(self._views) > VIEW_CACHE:
            self._views.popitem(last=False)
        return got

    def detail(self, turn: int) -> TurnDetail:
        """The view of `turn` with what the workbench draws beside it (counts tiktoken: in a worker)."""
        kept = self._fold(turn)
        if kept[3] is not None:
            return kept[3]
        view, calibration, counter, _ = kept
        for part in view.edits.parts:
            if isinstance(part, Covered):   # here, in the worker: the list asks at every repaint
                part.index(self._indexed.get(part.kind))
                self._indexed[part.kind] = part
        sent_by_id = {m.id: m for m in view.messages}
        summary = None
        # the summary message, or the first user message it was joined into
        carrier = None
        joined: dict[str, tuple[str, ...]] = {}
        for m in view.messages:
            if m.meta:
                if m.meta.get("compaction") is not None:
                    carrier = m
                if m.meta.get("joined"):
                    joined[m.id] = tuple(m.meta["joined"])
        if carrier is not None:
            ranges = tuple(p for p in view.edits.parts if isinstance(p, Covered) and p.kind == "summarized")
            covered = ranges[0].message_ids() if len(ranges) == 1 else \
                tuple(dict.fromkeys(chain.from_iterable(r.message_ids() for r in ranges)))
            summary = Summary(carrier, self.compactions().get(carrier.meta["compaction"]), covered, ranges)
        exact = counter.exact_messages(view.messages) if counter.exact_available else None
        heuristic = sum(heuristic_message(m) for m in view.messages)
        kept[3] = TurnDetail(view, EditsById(view.edits), sent_by_id, summary, self.history_size(view.turn),
                             heuristic, exact, counter.encoding_name, calibration,
                             self.window_source_at(view.window), self.counter, joined)
        return kept[3]

    def recorded_origins(self) -> dict[str, int]:
        """The log's compactions this replay applies, by who made them (37.2): "by you" (D, the
        manual trigger, in an overlay or a live chat), "by the live agent" (Breakwater's own session
        log) or "recorded in the transcript" (another agent's), in that order, those there are."""
        sim = self.simulation
        if sim is None or not sim.recorded:
            return {}
        events = {ev.id: ev for ev in self.log.events if ev.type == "compaction"}
        counts = {"by you": 0, "by the live agent": 0, "recorded in the transcript": 0}
        for cid in sim.recorded:
            ev = events.get(cid)
            if ev is not None and ev.get("trigger") == "manual":
                counts["by you"] += 1
            elif self.log.source_format == "native":
                counts["by the live agent"] += 1
            else:
                counts["recorded in the transcript"] += 1
        return {k: n for k, n in counts.items() if n}

    def compaction_by(self, turn: int) -> str | None:
        """Who already compacts request `turn`, if anyone does (37.4: D there would make the same
        summary): "you" (a manual trigger), "the transcript" / "the live agent" (recorded), else
        "your policy"."""
        made = [c for c in self.compactions().values() if c.turn == turn]
        if not made:
            return None
        events = {ev.id: ev for ev in self.log.events if ev.type == "compaction"}
        comp = made[-1]
        if comp.trigger == "manual":
            return "you"
        if comp.id in events:
            return "the live agent" if self.log.source_format == "native" else "the transcript"
        return "your policy"

    def window_source_at(self, window: int) -> str:
        """Where the window a request is planned under came from: the policy's source, unless the
        session changed it on the way (a `config` event: the provider's context-length error, else
        the session's own setting), issue 37.2."""
        if window == self.policy.window:
            return self.window_source
        for ev in reversed(self.log.events):
            if ev.type == "config" and ev.get("window") == window:
                reason = str(ev.get("reason") or "")
                return "the provider's error" if reason.startswith("the provider") else "set in the session"
        return self.window_source

    def history_size(self, turn: int) -> int:
        """How many log messages come before request `turn` (its history)."""
        if len(self._history) != self.turns + 1:
            sizes, n = [], 0
            for entry in self.log.entries:
                if isinstance(entry, Message):
                    if entry.role == "assistant":
                        sizes.append(n)
                    n += 1
            self._history = sizes + [n]
        return self._history[max(1, min(turn, len(self._history))) - 1]

    # -- what part 2 and part 3 build on ----------------------------------------------------------
    def with_policy(self, policy: Policy) -> "Replay":
        """The same log under another policy (not yet run)."""
        source = self.window_source if policy.window == self.policy.window else "tuned"
        return Replay(self.log, policy, self.counter, self.model, self.summarizer, recording=self.recording,
                      tokens=self._tokens(), window_source=source)

    def append(self, entry: Entry) -> None:
        """A live entry: appended to the log; figures are stale until the next `run()`."""
        self.log.append(entry)
        with self._lock:
            self._views.clear()
            self._live = None
            self._near = {}
            self._compactions = None
            self._history = []
