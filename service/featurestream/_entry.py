"""Entry point of the ``featurestream`` command (and ``python -m featurestream``).

One command for both packages: the server's ``serve``, ``bench`` and ``compare``
(:mod:`featurestream.cli`) and the client's ``replay``, ``selected``,
``events``, ``streams`` and ``status`` (``featurestream_client.cli``), in one
parser, so that ``--help`` lists them all and each runs as its own package says.

Before numpy loads, ``serve`` defaults the BLAS libraries to one thread: the
server already runs selectors in worker threads beside uvicorn's event loop,
and BLAS threads competing for the same cores made FSDS's SVD several times
slower on a 2-core machine. Setting the variables yourself overrides this.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``featurestream`` subcommand."""
    from featurestream import cli
    from featurestream_client.cli import add_commands

    return cli.build_parser(add_commands)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        for var in BLAS_THREAD_VARIABLES:
            os.environ.setdefault(var, "1")
    # Imported only now: numpy, which both command lines load, reads the variables above.
    from featurestream import cli
    from featurestream_client.cli import add_commands

    return cli.main(args, add_commands)


__all__ = ["build_parser", "main"]
