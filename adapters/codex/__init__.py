"""Codex → Universal Events: the live streams and Codex's own session files.

* :class:`CodexAdapter` (``--from codex``) reads ``codex exec --json`` lines and the
  app-server v2 notifications (raw lines or the ``openai_codex`` SDK's typed
  notifications), told apart line by line. See :mod:`adapters.codex._exec` and
  :mod:`adapters.codex._app_server` for what each native event becomes, and
  :mod:`adapters.codex._core` for how a response's items become one message and how
  items re-emitted after a retry are recognised.
* :class:`CodexRolloutAdapter` (``--from codex-rollout``) imports a rollout file, whose
  response items are the exact history Codex sends to the model
  (:mod:`adapters.codex._rollout`).
* :func:`tap` / :func:`atap` wrap the SDK's turn stream (``TurnHandle.stream()``,
  ``AsyncTurnHandle.stream()``).

Which source has what the next model request needs (checked against the captures'
``requests/*.json``):

======================================  ==========  ===========  ========
                                        exec json   app-server   rollout
======================================  ==========  ===========  ========
reasoning summary / message text        yes         yes          yes
``rs_`` / ``msg_`` ids                  no          yes          yes
reasoning ``encrypted_content``         no          raw events   yes
function call name + JSON arguments     no          raw events   yes
``call_id`` pairing call and output     no (local)  yes          yes
tool output as sent to the model        no (plain)  raw events   yes
the model's order of parallel calls     no (run)    raw events   yes
the prompt                              no          yes          yes
the model (provenance)                  ``model=``  yes          yes
======================================  ==========  ===========  ========

"raw events": only with the app-server's ``rawResponseItem/completed`` notifications.
"run": the order the commands ran in, which for the calls of one response (parallel
calls) is not always the model's.

The text of a command's ``tool/result``: Codex does not send the model a command's
plain output but wraps it (``Chunk ID: …\nWall time: …\nProcess exited with code 0\n
Original token count: 1\nOutput:\n2\n``). Where the exact ``function_call_output`` is
in the input — the rollout's ``response_item``, the app-server's raw items — the
result's ``content`` is exactly that text; the plain output is in ``details["output"]``
and the exit code in ``exit_code``. ``codex exec --json`` and an app-server stream
without raw events (e.g. a resumed thread: ``thread/resume`` does not take
``experimentalRawEvents``) give only the plain output, as ``content``.

The request settings: every source writes a ``request/header`` (``openai`` /
``responses`` / the model) once the model is known, with what every Codex request
carries, ``store: false`` (so a Responses rendering replays reasoning only with its
``encrypted_content``, never by id alone). The rollout's also has the system prompt and
the reasoning config of ``turn_context`` as the request sends it (``reasoning: {effort,
summary}``, ``include: ["reasoning.encrypted_content"]``); the live streams show neither,
and their header leaves them unknown.

The model: every assistant message and its thinking / tool-call parts carry
``Provenance("openai", "responses", model)`` once the model is known — from the
``model=`` option, app-server ``thread/started``, the rollout's ``session_meta``
(``base_instructions.provenance``), ``turn_context`` or ``thread_settings_applied``.
Parts gathered before it was known get it when their message is emitted.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from adapters._tap import EventLog, log_session_id
from adapters._tap import atap as generic_atap
from adapters._tap import tap as generic_tap
from adapters.codex._core import codex_usage
from adapters.codex._live import CodexAdapter, notification_to_line
from adapters.codex._rollout import CodexRolloutAdapter
from universal_event.events import Event, EventBase, TurnEndEvent, TurnStartEvent
from universal_event.log import SessionLog
from universal_event.runtimes import codex_rollout_turn, import_codex_turns, reconcile_codex_turn

__all__ = [
    "CodexAdapter",
    "CodexRolloutAdapter",
    "atap",
    "codex_usage",
    "notification_to_line",
    "tap",
]

T = TypeVar("T")


def tap(
    stream: Iterable[T],
    log: EventLog,
    *,
    adapter: CodexAdapter | None = None,
    codex_home: Path | None = None,
    thread_id: str | None = None,
) -> Iterator[T]:
    """Iterate an ``openai_codex`` turn stream unchanged while its events go to ``log``.

    ``for notification in tap(handle.stream(), log): ...`` — each ``Notification`` is
    normalised and logged (checkpointed when a turn ends or a tool call is logged) before
    the caller sees it; a stream cut short closes the turn as interrupted. Pass the
    thread's adapter to keep its model and state across turns.

    With ``codex_home`` (the app-server's ``CODEX_HOME``) and ``thread_id``
    (``handle.thread_id``), each turn that ends is made what Codex sent the model, from
    the thread's rollout (:func:`~universal_event.runtimes.reconcile_codex_turn`, as the
    runner does): the exact function calls and tool outputs of a thread without raw
    events, a compaction's history. And when the turn starts, what Codex will send that
    the log lacks is logged first (:func:`~universal_event.runtimes.import_codex_turns`):
    the log's last turn if a killed app-server cut it (what Codex kept, ``aborted``
    results for calls left without one), turns run outside this log.
    """
    adapter = adapter or CodexAdapter(session_id=log_session_id(log))
    return generic_tap(stream, adapter, _reconciling(log, codex_home, thread_id))


def atap(
    stream: AsyncIterable[T],
    log: EventLog,
    *,
    adapter: CodexAdapter | None = None,
    codex_home: Path | None = None,
    thread_id: str | None = None,
) -> AsyncIterator[T]:
    """:func:`tap` for the async SDK's turn stream (``AsyncTurnHandle.stream()``)."""
    adapter = adapter or CodexAdapter(session_id=log_session_id(log))
    return generic_atap(stream, adapter, _reconciling(log, codex_home, thread_id))


def _reconciling(log: EventLog, codex_home: Path | None, thread_id: str | None) -> EventLog:
    """``log``, each turn reconciled with its rollout when it ends (given where)."""
    if codex_home is None or thread_id is None or not isinstance(log, SessionLog):
        return log
    return _TurnsReconciled(log, codex_home, thread_id)


class _TurnsReconciled:
    """A :class:`SessionLog` that logs what the thread's rollout has and the log lacks
    when a turn starts (before it: turns run elsewhere since, a cut turn as Codex kept
    it), and reconciles each turn with the rollout once the
    turn's end is logged (the rollout is read again, briefly, until it holds that end)."""

    def __init__(self, log: SessionLog, codex_home: Path, thread_id: str) -> None:
        self.log = log
        self.session_id = log.session_id
        self._codex_home = codex_home
        self._thread_id = thread_id

    def extend(self, events: Iterable[EventBase]) -> Sequence[EventBase]:
        events = list(events)
        start = next((i for i, e in enumerate(events) if isinstance(e, TurnStartEvent)), None)
        logged: list[Event] = []
        if start is not None:
            logged += self.log.extend(events[:start])
            logged += import_codex_turns(self.log, self._codex_home, self._thread_id)
            events = events[start:]
        logged += self.log.extend(events)
        ended = [e.turn_id for e in logged if isinstance(e, TurnEndEvent) and e.turn_id]
        for turn_id in ended:
            logged += self._reconciled(turn_id)
        return logged

    def _reconciled(self, turn_id: str) -> list[Event]:
        rollout = codex_rollout_turn(self._codex_home, self._thread_id, turn_id)
        if rollout is None:
            return []
        return reconcile_codex_turn(self.log, self.log.events(), rollout)

    def checkpoint(self) -> int:
        return self.log.checkpoint()
