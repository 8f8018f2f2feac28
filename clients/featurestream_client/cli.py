"""The client commands of the ``featurestream`` command line.

``replay``, ``create``, ``delete``, ``selected``, ``events``, ``streams`` and ``status`` talk to a
running server through :class:`~featurestream_client.Client`: human tables by
default, ``--json`` for scripts. Errors are one line on stderr and a non-zero
exit status. The ``featurestream`` entry point adds them (:func:`add_commands`)
beside the server's ``serve`` and ``bench``, so that one command offers all.

This module is the parser: each command's options and the error handling
they share. The commands run in ``_cli_replay`` (``replay``), ``_cli_streams``
(``create``, ``delete``, ``selected``, ``streams``, ``status``) and
``_cli_events`` (``events``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from featurestream_client._base import DEFAULT_URL
from featurestream_client._cli_events import EVENT_COLUMNS, MIN_INTERVAL, run_events
from featurestream_client._cli_replay import run_replay
from featurestream_client._cli_streams import (
    run_create,
    run_delete,
    run_selected,
    run_status,
    run_streams,
)
from featurestream_client._files import CliError, load_table, split_target
from featurestream_client.errors import ConnectionFailed, FeatureStreamError, type_suffix


def _client_command(func: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Run ``func``; client and data errors become one line on stderr and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        prefix = f"featurestream {args.command}"
        try:
            return func(args)
        except CliError as exc:
            message = str(exc)
        except ConnectionFailed as exc:
            message = f"cannot reach the server at {args.url}: {exc.detail}"
        except FeatureStreamError as exc:
            kind = type_suffix(exc.type)
            message = f"{exc.detail}" + (f" ({exc.status} {kind})" if exc.status else "")
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            # The reader of stdout went away (`| head`): stop quietly, as Unix tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141
        print(f"{prefix}: {' '.join(message.split())}", file=sys.stderr)
        return 1

    return run


def _add_client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url",
        default=os.environ.get("FEATURESTREAM_URL", DEFAULT_URL),
        help=f"Server URL (default $FEATURESTREAM_URL or {DEFAULT_URL}).",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get("FEATURESTREAM_API_KEY"),
        help="Bearer key, when the server requires one (default $FEATURESTREAM_API_KEY).",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="Seconds to wait for the server.")
    p.add_argument("--json", action="store_true", help="Print JSON instead of a table.")


def _add_file_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--drop",
        action="append",
        metavar="COL",
        help="Leave this column of the file out (ids, dates...); repeatable.",
    )
    p.add_argument(
        "--delimiter",
        default=",",
        help="The .csv cell separator (default ','; '\\t' for tabs).",
    )
    p.add_argument(
        "--encoding",
        default="utf-8",
        help="The .csv file's text encoding (default utf-8; e.g. latin-1, cp1252).",
    )


def _add_create_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target-type",
        choices=["auto", "continuous", "binary", "multiclass"],
        help="How the target is read (sent as target_type; the server's default: auto).",
    )
    p.add_argument(
        "--label",
        action="append",
        metavar="KEY=VALUE",
        help="A bookkeeping label of the new stream; repeatable.",
    )
    p.add_argument(
        "--ttl",
        type=float,
        metavar="SECONDS",
        help="The new stream expires after this long without a write (ttl_seconds).",
    )


def add_commands(sub: Any) -> None:
    """Add the client commands to the subparsers ``sub`` of the ``featurestream`` parser."""
    replay = sub.add_parser(
        "replay",
        help="Stream a data file into a new stream on a server and print the selection.",
        description="Create a stream and send a file to it: its columns, in file order, to a "
        "feature-stream algorithm (the target column taken out), or its rows to an "
        "instance-stream algorithm. Reads .csv (a header row of names), .npy (columns named "
        "x0, x1, ...) and .parquet (needs pyarrow).",
    )
    replay.add_argument("data", help="A .csv, .npy or .parquet file.")
    replay.add_argument(
        "--algorithm", help="e.g. saola, osfs, ofs, fsds (with --append: the stream's)."
    )
    replay.add_argument(
        "--target",
        help="Target column (a name, or a position such as -1): required for feature-stream "
        "algorithms, the labels for supervised instance-stream ones. Class labels may be "
        "strings.",
    )
    replay.add_argument("--params", default="{}", help="Algorithm parameters as a JSON object.")
    replay.add_argument(
        "--group-sep",
        metavar="SEP",
        help="For group algorithms (group_saola): a column's group is its name up to SEP.",
    )
    replay.add_argument(
        "--stream-id", help="Id of the stream to create (default: generated), or to --append to."
    )
    replay.add_argument(
        "--append",
        action="store_true",
        help="Add the file to the existing stream --stream-id: more rows to an instance "
        "stream (columns matched by name), more columns to a feature stream.",
    )
    replay.add_argument(
        "--chunk",
        type=int,
        help="Columns (feature streams; default 1000) or rows (instance streams; default 500) "
        "per request.",
    )
    _add_file_options(replay)
    _add_create_options(replay)
    replay.add_argument("--quiet", action="store_true", help="No progress bar.")
    replay.add_argument(
        "--progress",
        action="store_true",
        help="Show the progress bar even when stderr is not a terminal.",
    )
    _add_client_options(replay)
    replay.set_defaults(func=_client_command(run_replay))

    create = sub.add_parser(
        "create",
        help="Create an empty stream (then feed it with replay --append or the SDK).",
        description="Create a stream: a feature stream takes its target from --data FILE "
        "--target COL; an instance stream its feature names from --feature-names or the "
        "header of --data FILE.",
    )
    create.add_argument("algorithm", help="e.g. saola, osfs, ofs, fsds.")
    create.add_argument("--stream-id", help="Id of the stream (default: generated).")
    create.add_argument("--params", default="{}", help="Algorithm parameters as a JSON object.")
    create.add_argument("--data", help="A .csv, .npy or .parquet file (target, names).")
    create.add_argument("--target", help="The target column of --data (feature streams).")
    create.add_argument("--feature-names", help="Instance streams: a,b,c.")
    _add_file_options(create)
    _add_create_options(create)
    _add_client_options(create)
    create.set_defaults(func=_client_command(run_create))

    delete = sub.add_parser("delete", help="Delete streams and everything they hold.")
    delete.add_argument("stream_ids", metavar="ID", nargs="+")
    _add_client_options(delete)
    delete.set_defaults(func=_client_command(run_delete))

    selected = sub.add_parser("selected", help="A stream's current selection.")
    selected.add_argument("stream_id", metavar="ID")
    _add_client_options(selected)
    selected.set_defaults(func=_client_command(run_selected))

    events = sub.add_parser(
        "events", help="A stream's decision log (--json: one JSON object per line)."
    )
    events.add_argument("stream_id", metavar="ID")
    events.add_argument("--after", help="Start after this event id.")
    events.add_argument("--limit", type=int, help="Print at most this many events.")
    events.add_argument(
        "--follow",
        action="store_true",
        help="Keep printing new events (one poll every --interval seconds) until Ctrl-C.",
    )
    events.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help=f"Seconds between polls with --follow (at least {MIN_INTERVAL}).",
    )
    _add_client_options(events)
    events.set_defaults(func=_client_command(run_events))

    streams = sub.add_parser("streams", help="Every stream on the server.")
    _add_client_options(streams)
    streams.set_defaults(func=_client_command(run_streams))

    status = sub.add_parser("status", help="A stream's counters.")
    status.add_argument("stream_id", metavar="ID")
    _add_client_options(status)
    status.set_defaults(func=_client_command(run_status))


__all__ = ["EVENT_COLUMNS", "CliError", "add_commands", "load_table", "split_target"]
