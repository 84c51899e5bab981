"""Test set-up.

The current ``anthropic``/``openai`` SDKs send HTTP through httpx2, which respx does not
patch. ``httpx2.alias_httpx()`` makes ``import httpx`` give httpx2 process-wide, so it
must run before anything imports httpx; pytest's own respx plugin is disabled in
``addopts`` (``-p no:respx``) and re-registered here, after the alias.
"""

from __future__ import annotations

import httpx2

httpx2.alias_httpx()

pytest_plugins = ("respx.plugin",)
