"""An ``openai_codex`` client of one's own (no runner), its turn streams logged with
``adapters.codex.tap(..., codex_home=, thread_id=)``: each turn is reconciled with the
thread's rollout as the runner reconciles it, so the history derived from the log is
the ``input`` Codex sends in its next request (the real CLI, offline against the fake
model). Without raw events the stream shows a command and its plain output, not the
``exec_command`` call and the wrapped output the model was sent."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from adapters.codex import CodexAdapter, tap
from adapters.openai_responses import render_request
from tests.e2e._support import codex_conversation, comparable_item, runner, tool_started
from universal_event.events import (
    AssistantMessageEvent,
    RequestHeaderEvent,
    ToolResultEvent,
    TurnEndEvent,
    WarningEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.log import SessionLog
from universal_event.parts import ToolCallPart
from universal_event.runtimes import bundled_codex, write_launcher

STEPS = [
    Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
    Reply(text="It is 2."),
    Reply(text="Thanks back."),
]


Items = list[dict[str, object]]


def _sdk_config(server_url: str, tmp_path: Path) -> tuple[Any, Any]:
    """The runner's Codex settings (offline, against ``server_url``) and an
    ``openai_codex`` config that starts the bundled CLI with them."""
    from openai_codex import CodexConfig

    codex_runner = runner("codex", server_url, tmp_path)
    codex_runner.write_config()
    codex_runner.cwd.mkdir(parents=True, exist_ok=True)
    binary = bundled_codex()
    assert binary is not None
    launcher = write_launcher(tmp_path / "bin" / "codex", binary, codex_runner.env())
    config = CodexConfig(codex_bin=str(launcher), cwd=str(codex_runner.cwd), env=codex_runner.env())
    return codex_runner, config


def _converse(tmp_path: Path, log: SessionLog, *, reconciled: bool) -> tuple[Items, Items]:
    """Two turns on a new thread started without raw events; the history derived before
    the second, rendered for the same model, and the conversation Codex sent in it."""
    from openai_codex import Codex
    from openai_codex.api import Thread

    with FakeModelServer(STEPS) as server:
        codex_runner, config = _sdk_config(server.url, tmp_path)
        adapter = CodexAdapter(session_id=log.session_id, model=codex_runner.model)
        history = []
        with Codex(config=config) as codex:
            client = codex._client
            started = client.thread_start(
                {
                    "approvalPolicy": "never",
                    "sandbox": "danger-full-access",
                    "model": codex_runner.model,
                    "cwd": str(codex_runner.cwd),
                }
            )
            thread_id = started.thread.id
            for prompt in ("Use the shell to compute 1+1 with bc", "Thanks"):
                history = log.derive_messages()
                handle = Thread(client, thread_id).turn(prompt)
                where = {"codex_home": codex_runner.codex_home, "thread_id": thread_id}
                for _ in tap(
                    handle.stream(), log, adapter=adapter, **(where if reconciled else {})
                ):
                    pass
        sent = server.model_requests()[2]
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = render_request(history, header)["input"]
    conversation = codex_conversation(sent.body["input"])[: len(rendered)]
    return [comparable_item(i) for i in rendered], [comparable_item(i) for i in conversation]


def test_a_turn_tapped_with_its_rollout_is_logged_as_codex_sent_it(tmp_path: Path) -> None:
    log = SessionLog()
    rendered, sent = _converse(tmp_path / "with", log, reconciled=True)
    assert rendered == sent
    assert not [e for e in log.events() if isinstance(e, WarningEvent)]
    calls = [
        part
        for e in log.events()
        if isinstance(e, AssistantMessageEvent)
        for part in e.content
        if isinstance(part, ToolCallPart)
    ]
    assert "exec_command" in {call.name for call in calls}  # the call the model made

    # The stream alone (no rollout): the history is not what Codex sent.
    rendered, sent = _converse(tmp_path / "without", SessionLog(), reconciled=False)
    assert rendered != sent


def _rendered(history: list[Any]) -> Items:
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    return [comparable_item(i) for i in render_request(history, header)["input"]]


def test_a_tapped_turn_after_a_killed_app_server_logs_what_codex_sends_first(
    tmp_path: Path,
) -> None:
    """The app-server dies while a tapped turn's command runs: the tap closes the turn
    (interrupted) with the call and no result. A new client resumes the thread; when its
    tapped turn starts, the tap logs what Codex sends of the cut turn (the rollout's) and
    the result Codex makes up for the call (``aborted``, in no file), before the turn."""
    from openai_codex import Codex
    from openai_codex.api import Thread

    steps = [
        Reply(text="One."),
        Reply(text="Running.", calls=[ShellCall("sleep 20; echo done")]),
        Reply(text="Three."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        codex_runner, config = _sdk_config(server.url, tmp_path)
        params = {
            "approvalPolicy": "never",
            "sandbox": "danger-full-access",
            "model": codex_runner.model,
            "cwd": str(codex_runner.cwd),
        }
        with Codex(config=config) as codex:
            client = codex._client
            thread_id = client.thread_start(params).thread.id
            where = {"codex_home": codex_runner.codex_home, "thread_id": thread_id}
            for prompt in ("First question", "Second question"):
                for notification in tap(
                    Thread(client, thread_id).turn(prompt).stream(), log, **where
                ):
                    if tool_started(notification):
                        os.kill(client._proc.pid, signal.SIGKILL)
                        break
        cut = [e for e in log.events() if isinstance(e, TurnEndEvent)][-1]
        assert cut.status == "interrupted"
        assert not [e for e in log.events() if isinstance(e, ToolResultEvent)]
        with Codex(config=config) as codex:
            client = codex._client
            client.thread_resume(thread_id, params)
            for _ in tap(Thread(client, thread_id).turn("Third question").stream(), log, **where):
                pass
        sent = server.model_requests()[-1]
    history = log.derive_messages()[:-2]  # before the third prompt
    rendered = _rendered(history)
    assert rendered == [comparable_item(i) for i in codex_conversation(sent.body["input"])][:-1]
    assert rendered[-1]["type"] == "function_call_output" and rendered[-1]["output"] == "aborted"
    ends = [e for e in log.events() if isinstance(e, TurnEndEvent)]
    assert [e.status for e in ends] == ["completed", "interrupted", "completed"]
