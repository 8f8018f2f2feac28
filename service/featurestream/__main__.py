"""``python -m featurestream``."""

from __future__ import annotations

from featurestream.cli import main

raise SystemExit(main())
