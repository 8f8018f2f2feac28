"""Entry point of the ``featurestream`` command (and ``python -m featurestream``).

Before numpy loads, ``serve`` defaults the BLAS libraries to one thread: the
server already runs selectors in worker threads beside uvicorn's event loop,
and BLAS threads competing for the same cores made FSDS's SVD several times
slower on a 2-core machine. Setting the variables yourself overrides this.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        for var in BLAS_THREAD_VARIABLES:
            os.environ.setdefault(var, "1")
    from featurestream.cli import main as cli_main

    return cli_main(args)


__all__ = ["main"]
