"""Shared helpers of the Anthropic / Claude Code adapter tests (fixtures, rendering).

``render_history`` turns neutral messages back into Anthropic ``messages`` blocks the
plain way (the oracle compares them with what real clients sent); it is deliberately
independent of the library's renderer so the oracle checks the adapters, not itself.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import (
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECORDED = FIXTURES / "recorded" / "anthropic-messages"
CAPTURED = FIXTURES / "captured" / "claude"
TRANSCRIPTS = FIXTURES / "recorded" / "claude-code"

SYSTEM_REMINDER = re.compile(r"\n*<system-reminder>.*?</system-reminder>\s*$", re.DOTALL)
"""Claude Code appends ``<system-reminder>`` text to the last tool result it sends."""


def recorded(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return loaded


def recorded_names() -> list[str]:
    return sorted(path.name for path in RECORDED.glob("*.json"))


def claude_runs() -> list[Path]:
    """Every captured Claude Code CLI / Agent SDK run directory."""
    return sorted(p for p in CAPTURED.glob("*/*") if p.is_dir())


def run_requests(run: Path) -> list[dict[str, Any]]:
    """The request bodies the runtime sent, in order."""
    paths = sorted((run / "requests").glob("*_POST_v1_messages.json"))
    return [json.loads(path.read_text())["body"] for path in paths]


def cli_prompt(run: Path) -> str:
    """The prompt of a ``claude -p PROMPT ...`` run (its cmdline.txt)."""
    words = shlex.split((run / "cmdline.txt").read_text())
    return words[words.index("-p") + 1]


def sse_body(interaction: dict[str, Any]) -> bytes:
    body = interaction["response_body"]
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


# ---------------------------------------------------------------------- neutral → wire


def _block(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        block: dict[str, Any] = {"type": "text", "text": part.text}
        if part.citations:
            block["citations"] = [c.native for c in part.citations]
        return block
    if isinstance(part, ThinkingPart):
        if part.redacted_data is not None:
            return {"type": "redacted_thinking", "data": part.redacted_data}
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
    if isinstance(part, ServerToolCallPart | ServerToolResultPart):
        return dict(part.native)
    raise AssertionError(f"unexpected part {part!r}")


def _tool_result(message: ToolMessage) -> dict[str, Any]:
    texts = [p for p in message.content if isinstance(p, TextPart)]
    content: Any = (
        texts[0].text
        if len(texts) == len(message.content) == 1
        else [{"type": "text", "text": p.text} for p in texts]
    )
    return {
        "type": "tool_result",
        "tool_use_id": message.call_id,
        "content": content,
        "is_error": message.is_error,
    }


def render_history(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Anthropic ``messages`` (tool results grouped per user turn)."""
    rendered: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            blocks = [{"type": "text", "text": p.text} for p in message.content]  # type: ignore[union-attr]
            rendered.append({"role": "user", "content": blocks})
        elif isinstance(message, AssistantMessage):
            rendered.append({"role": "assistant", "content": [_block(p) for p in message.content]})
        elif isinstance(message, ToolMessage):
            last = rendered[-1] if rendered else None
            if (
                last is not None
                and last["role"] == "user"
                and all(b["type"] == "tool_result" for b in last["content"])
            ):
                last["content"].append(_tool_result(message))
            else:
                rendered.append({"role": "user", "content": [_tool_result(message)]})
    return rendered


# ---------------------------------------------------------------------- claude_agent_sdk


def sdk_objects(path: Path) -> list[Any]:
    """Rebuild the real claude_agent_sdk objects from a capture's sdk_messages.jsonl.

    The capture stored ``dataclasses.asdict`` of each yielded message; blocks lost their
    class, which is told apart by their keys (as the SDK's own parser does).
    """
    from claude_agent_sdk import types as sdk

    def block(data: dict[str, Any]) -> Any:
        if "signature" in data:
            return sdk.ThinkingBlock(**data)
        if "tool_use_id" in data:
            return sdk.ToolResultBlock(**data)
        if "input" in data:
            return sdk.ToolUseBlock(**data)
        return sdk.TextBlock(**data)

    objects = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        cls = getattr(sdk, record["py_type"])
        fields = dict(record["fields"])
        if record["py_type"] in ("AssistantMessage", "UserMessage") and isinstance(
            fields.get("content"), list
        ):
            fields["content"] = [block(b) for b in fields["content"]]
        objects.append(cls(**fields))
    return objects
