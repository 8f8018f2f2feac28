"""``featurestream events``: a stream's decision log, as a table, JSON lines, or followed."""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from featurestream_client._cli_inputs import connect
from featurestream_client._cli_output import format_cell, format_table
from featurestream_client._files import CliError
from featurestream_client.client import Stream

EVENT_COLUMNS = ["id", "version", "seq", "producer", "type", "names", "reason"]
EVENT_WIDTHS = [8, 7, 5, 20, 8, 24, 0]  # while following: rows are printed as they come
#: The shortest pause between two polls of ``events --follow`` (seconds).
MIN_INTERVAL = 0.05
#: The longest a cell of the events table gets (producer, names, reason), in characters.
EVENT_CELL = 40


def _short(text: Any, width: int = EVENT_CELL) -> Any:
    if not isinstance(text, str) or len(text) <= width:
        return text
    return text[: width - 3] + "..."


def _event_names(names: Sequence[str]) -> str:
    """One name as it is; more than one as a count (``--json`` has every name)."""
    if not names:
        return "-"
    if len(names) == 1:
        return str(_short(names[0]))
    return f"{len(names)} features"


def _event_row(event: Any) -> list[Any]:
    return [
        event.id,
        event.version,
        event.seq,
        _short(event.producer),
        event.type,
        _event_names(event.names),
        _short(event.reason),
    ]


def run_events(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be >= 1; got {args.limit}.")
    if args.interval < MIN_INTERVAL:
        raise CliError(f"--interval must be >= {MIN_INTERVAL} seconds; got {args.interval}.")
    # Ctrl-C (how one stops following) ends it without a traceback, status 130.
    with connect(args) as client:
        _print_events(client.stream(args.stream_id), args)
    return 0


def _print_events(stream: Stream, args: argparse.Namespace) -> None:
    events: Iterator[Any] = stream.iter_events(
        args.after, follow=args.follow, poll_interval=args.interval
    )
    if args.limit is not None:
        events = itertools.islice(events, args.limit)
    if args.json:
        for event in events:
            print(json.dumps(event.raw, allow_nan=False), flush=args.follow)
    elif not args.follow:
        print(format_table(EVENT_COLUMNS, [_event_row(e) for e in events]))
    else:
        header = zip(EVENT_COLUMNS, EVENT_WIDTHS, strict=True)
        print("  ".join(h.ljust(w) for h, w in header).rstrip(), flush=True)
        for event in events:
            cells = zip(_event_row(event), EVENT_WIDTHS, strict=True)
            print("  ".join(format_cell(v).ljust(w) for v, w in cells).rstrip(), flush=True)
