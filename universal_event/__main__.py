"""``python -m universal_event``."""

from universal_event.cli import main

raise SystemExit(main())
