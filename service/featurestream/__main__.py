"""``python -m featurestream``."""

from __future__ import annotations

from featurestream._entry import main

raise SystemExit(main())
