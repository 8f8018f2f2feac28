"""``featurestream bench``: selectors measured in process and through the service.

* ``datasets``: synthetic sets shaped like those of the SAOLA paper, with
  planted relevant and redundant features (recall is checked);
* ``runs``: one selector on one set, in process or end to end through a server;
* ``scaling``: cost per column against n and |S|, per instance against d;
* ``server``: a spawned ``featurestream serve`` and its peak memory;
* ``classic``: the original single-run modes (``--mode features|instances``);
* ``command``: the command line (``featurestream bench --help``).
"""

from __future__ import annotations

from featurestream.bench.command import main

__all__ = ["main"]
