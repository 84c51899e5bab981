"""The README's Python example runs as written and prints what it claims."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert blocks, "the README has a Python example"
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-c", block],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert result.returncode == 0, result.stderr
        assert "['user', 'assistant', 'tool', 'assistant']" in result.stdout
        assert (
            "gpt-5 ['user', 'assistant', 'function_call', 'function_call_output'" in result.stdout
        )
