"""Codex app-server notifications: normalising vs the SDK's own parsing, same lines, same run.

project:  the captured app-server notification lines (raw bytes, as read from the
          server's stdout) → ``CodexAdapter`` events → log bytes (``encode_lines``).
baseline: what ``openai_codex`` does with each line before a caller sees it
          (``CodexClient._reader_loop``): ``json.loads`` the line, then
          ``CodexClient._coerce_notification`` = ``NOTIFICATION_MODELS[method]
          .model_validate(params)`` into the pydantic notification model.

Target: the project at least 5x faster per line. A second line (report only) feeds the
whole stdout, responses to requests included, in 64 KiB reads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _ratio import best_of, ratio_line  # noqa: E402
from openai_codex.client import CodexClient  # noqa: E402

from adapters.codex import CodexAdapter  # noqa: E402
from universal_event.codec import encode_lines  # noqa: E402

CAPTURED = HERE.parent / "tests" / "fixtures" / "captured" / "codex" / "app_server"
REPEAT = 40
"""The five captured runs, repeated: a long session's worth of notification lines."""


def _stdout_lines() -> list[bytes]:
    """Everything the app-server wrote: notifications and the responses to requests."""
    lines = []
    for wire in sorted(CAPTURED.glob("*/wire/server_to_client.jsonl")):
        lines += wire.read_bytes().splitlines(keepends=True)
    return lines * REPEAT


def _notification_lines() -> list[bytes]:
    # notifications only, as the SDK routes them
    return [line for line in _stdout_lines() if b'"method"' in line[:12]]


def main() -> None:
    lines = _notification_lines()
    data = b"".join(lines)
    coerce = CodexClient._coerce_notification

    def project() -> None:
        adapter = CodexAdapter()
        events = adapter.feed(data)
        events += adapter.close()
        encode_lines(events)

    def baseline() -> None:
        for line in lines:
            message = json.loads(line)
            coerce(None, message["method"], message.get("params"))  # type: ignore[arg-type]

    project_s, baseline_s = best_of(15, project, baseline)
    per_line = 1e6 / len(lines)
    print(f"# {len(lines)} app-server notification lines", flush=True)
    print(
        ratio_line(
            "codex_app_server_normalize_vs_sdk_validate",
            project_s * per_line,
            baseline_s * per_line,
            "us/line",
            ">=",
            5.0,
        ),
        flush=True,
    )
    _stdout_report()


def _stdout_report() -> None:
    """Report only: the whole stdout (responses too) fed in 64 KiB reads, as a caller
    reading the app-server's pipe would, against the SDK's reader loop over the same
    lines (``json.loads`` each; notifications validated, responses routed as dicts)."""
    lines = _stdout_lines()
    data = b"".join(lines)
    reads = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    coerce = CodexClient._coerce_notification

    def project() -> None:
        adapter = CodexAdapter()
        events = [event for chunk in reads for event in adapter.feed(chunk)]
        events += adapter.close()
        encode_lines(events)

    def baseline() -> None:
        for line in lines:
            message = json.loads(line)
            if "method" in message:
                coerce(None, message["method"], message.get("params"))  # type: ignore[arg-type]

    project_s, baseline_s = best_of(15, project, baseline)
    per_line = 1e6 / len(lines)
    line = ratio_line(
        "codex_app_server_stdout_normalize_vs_sdk_read",
        project_s * per_line,
        baseline_s * per_line,
        "us/line",
        ">=",
        5.0,
    )
    print(f"# {len(lines)} app-server stdout lines, 64 KiB reads", flush=True)
    print(line.replace("ok=yes", "ok=yes(report-only)").replace("ok=no", "ok=no(report-only)"))


if __name__ == "__main__":
    main()
