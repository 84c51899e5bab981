"""All adapter benchmarks in one run: each dialect's module prints its own RATIO lines.

python bench/bench_adapters.py [anthropic|openai_chat|openai_responses|codex ...]
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

DIALECTS = ("anthropic", "openai_chat", "openai_responses", "codex")


def main() -> None:
    chosen = sys.argv[1:] or list(DIALECTS)
    for dialect in chosen:
        module = importlib.import_module(f"adapters_{dialect}")
        print(f"# {dialect}", flush=True)
        module.main()


if __name__ == "__main__":
    main()
