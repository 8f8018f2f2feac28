"""The client commands of the ``featurestream`` command line.

``replay``, ``selected``, ``events``, ``streams`` and ``status`` talk to a
running server through :class:`~featurestream_client.Client`: human tables by
default, ``--json`` for scripts. Errors are one line on stderr and a non-zero
exit status. The ``featurestream`` entry point adds them (:func:`add_commands`)
beside the server's ``serve`` and ``bench``, so that one command offers all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from featurestream_client._base import DEFAULT_URL
from featurestream_client._files import CliError, Matrix, load_table, split_target
from featurestream_client.client import Client
from featurestream_client.errors import ConnectionFailed, FeatureStreamError, type_suffix
from featurestream_client.models import Algorithm, Selection


class Progress:
    """A plain-text progress bar on stderr (no dependency)."""

    def __init__(self, total: int, unit: str, stream: TextIO, enabled: bool) -> None:
        self.total = max(total, 1)
        self.unit = unit
        self.stream = stream
        self.enabled = enabled
        self._shown = False
        self._started = time.monotonic()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        frac = min(1.0, done / self.total)
        bar = "#" * int(30 * frac)
        rate = done / max(time.monotonic() - self._started, 1e-9)
        self.stream.write(
            f"\rreplay {int(100 * frac):3d}% [{bar:<30}] {done}/{self.total} {self.unit} "
            f"({rate:,.0f}/s)"
        )
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _selection_json(selection: Selection) -> list[dict[str, Any]]:
    return [{"name": f.name, "score": f.score, "group": f.group} for f in selection.features]


def _score_header(algorithm: Algorithm | None, params: dict[str, Any] | None) -> str:
    """The score column's title: what the score means and which end is best."""
    kind = None if algorithm is None else algorithm.score_kind_for(params)
    if algorithm is None or kind is None:
        return "score"
    if algorithm.score_by_magnitude:
        return f"score ({kind}, largest |score| first)"
    return f"score ({kind}, {'highest' if algorithm.higher_is_better else 'lowest'} first)"


def _selection_table(
    selection: Selection, algorithm: Algorithm | None = None, params: dict[str, Any] | None = None
) -> str:
    """The selection, best score first (as the algorithm ranks its scores), numbered."""
    features = list(selection.features) if algorithm is None else algorithm.rank(selection.features)
    groups = any(f.group is not None for f in features)
    headers = ["#", "name", _score_header(algorithm, params)] + (["group"] if groups else [])
    rows = [
        [i, f.name, f.score] + ([f.group] if groups else [])
        for i, f in enumerate(features, start=1)
    ]
    return _table(headers, rows)


def _algorithm_of(client: Client, stream_id: str) -> tuple[Algorithm | None, dict[str, Any]]:
    """The catalogue entry of a stream's algorithm, and the stream's parameters."""
    info = client.stream(stream_id).refresh()
    by_name = {a.name: a for a in client.algorithms()}
    return by_name.get(info.algorithm), dict(info.params)


def _group_columns(names: list[str], sep: str | None) -> dict[str, list[int]] | None:
    """Column positions per group (the name's part before ``sep``), groups in order of arrival."""
    if sep is None:
        return None
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name.split(sep, 1)[0], []).append(i)
    return groups


def _client(args: argparse.Namespace) -> Client:
    return Client(args.url, api_key=args.api_key, timeout=args.timeout)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, allow_nan=False))


def _replay(args: argparse.Namespace) -> int:
    try:
        params = json.loads(args.params)
    except ValueError as exc:
        raise CliError(f"--params is not valid JSON: {exc}.") from None
    if not isinstance(params, dict):
        raise CliError("--params must be a JSON object, e.g. '{\"alpha\": 0.05}'.")
    if args.chunk is not None and args.chunk < 1:
        raise CliError(f"--chunk must be >= 1; got {args.chunk}.")
    names, data = load_table(args.data)
    with _client(args) as client:
        algorithms = {a.name: a for a in client.algorithms()}
        algorithm = algorithms.get(args.algorithm)
        if algorithm is None:
            raise CliError(
                f"unknown algorithm {args.algorithm!r}; the server hosts "
                f"{', '.join(sorted(algorithms))}."
            )
        if algorithm.kind == "features" and args.target is None:
            raise CliError(f"{args.algorithm} selects over feature columns: give --target COL.")
        names, matrix, y = split_target(names, data, args.target)
        if not names:
            raise CliError(f"{args.data}: no feature columns besides the target.")
        show = not args.quiet and (args.progress or sys.stderr.isatty())
        groups = _group_columns(names, args.group_sep) if algorithm.supports_groups else None
        if algorithm.supports_groups and groups is None:
            raise CliError(
                f"{args.algorithm} decides whole groups of columns: give --group-sep SEP "
                "(the group of column 'g1.age' with --group-sep . is 'g1')."
            )
        if groups is not None:
            stream = client.create_stream(
                args.algorithm, target=y, params=params, id=args.stream_id
            )
            progress = Progress(len(names), "columns", sys.stderr, show)
            progress.update(0)
            chunk = args.chunk or 1000
            batch: list[tuple[str, tuple[Matrix, list[str]]]] = []
            done = size = 0
            for k, (group, members) in enumerate(groups.items(), start=1):
                batch.append((group, (matrix[:, members], [names[i] for i in members])))
                size += len(members)
                if size >= chunk or k == len(groups):
                    # Whole groups per request: group-SAOLA decides a group as a whole.
                    stream.add_groups(batch, chunk_columns=chunk)
                    done += size
                    progress.update(done)
                    batch, size = [], 0
        elif algorithm.kind == "features":
            stream = client.create_stream(
                args.algorithm, target=y, params=params, id=args.stream_id
            )
            chunk = args.chunk or 1000
            progress = Progress(len(names), "columns", sys.stderr, show)
            progress.update(0)
            for lo in range(0, len(names), chunk):
                hi = min(lo + chunk, len(names))
                stream.add_features(matrix[:, lo:hi], names[lo:hi], chunk_columns=chunk)
                progress.update(hi)
        else:
            stream = client.create_stream(
                args.algorithm, feature_names=names, params=params, id=args.stream_id
            )
            chunk = args.chunk or 500
            progress = Progress(matrix.shape[0], "rows", sys.stderr, show)
            progress.update(0)
            for lo in range(0, matrix.shape[0], chunk):
                hi = min(lo + chunk, matrix.shape[0])
                stream.add_instances(
                    matrix[lo:hi], None if y is None else y[lo:hi], batch_size=chunk
                )
                progress.update(hi)
        progress.close()
        selection = stream.selected()
    if args.json:
        _print_json(
            {
                "stream": stream.id,
                "algorithm": args.algorithm,
                "kind": algorithm.kind,
                "version": selection.version,
                "score_kind": algorithm.score_kind_for(params),
                "higher_is_better": algorithm.higher_is_better,
                "selected": _selection_json(selection),
            }
        )
    else:
        total = (
            f"{len(names)} features" if algorithm.kind == "features" else f"{matrix.shape[0]} rows"
        )
        print(
            f"stream {stream.id} ({args.algorithm}, {total}), version {selection.version}: "
            f"{len(selection.features)} selected"
        )
        print(_selection_table(selection, algorithm, params))
    return 0


def _selected(args: argparse.Namespace) -> int:
    with _client(args) as client:
        selection = client.stream(args.stream_id).selected()
        algorithm, params = _algorithm_of(client, args.stream_id)
    if args.json:
        _print_json(
            {
                "stream": args.stream_id,
                "version": selection.version,
                "updated_at": selection.updated_at,
                "score_kind": None if algorithm is None else algorithm.score_kind_for(params),
                "higher_is_better": None if algorithm is None else algorithm.higher_is_better,
                "features": _selection_json(selection),
            }
        )
    else:
        print(
            f"stream {args.stream_id}, version {selection.version}: "
            f"{len(selection.features)} selected"
        )
        print(_selection_table(selection, algorithm, params))
    return 0


EVENT_COLUMNS = ["id", "version", "seq", "producer", "type", "names", "reason"]
EVENT_WIDTHS = [8, 7, 5, 20, 8, 24, 0]  # while following: rows are printed as they come


def _event_row(event: Any) -> list[Any]:
    return [
        event.id,
        event.version,
        event.seq,
        event.producer,
        event.type,
        list(event.names),
        event.reason,
    ]


def _events(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be >= 1; got {args.limit}.")
    with _client(args) as client:
        stream = client.stream(args.stream_id)
        events: Iterator[Any] = stream.iter_events(
            args.after, follow=args.follow, poll_interval=args.interval
        )
        if args.limit is not None:
            events = itertools.islice(events, args.limit)
        if args.json:
            for event in events:
                print(json.dumps(event.raw, allow_nan=False), flush=args.follow)
        elif not args.follow:
            print(_table(EVENT_COLUMNS, [_event_row(e) for e in events]))
        else:
            header = zip(EVENT_COLUMNS, EVENT_WIDTHS, strict=True)
            print("  ".join(h.ljust(w) for h, w in header).rstrip(), flush=True)
            for event in events:
                cells = zip(_event_row(event), EVENT_WIDTHS, strict=True)
                print("  ".join(_cell(v).ljust(w) for v, w in cells).rstrip(), flush=True)
    return 0


def _streams(args: argparse.Namespace) -> int:
    with _client(args) as client:
        streams = client.streams()
    if args.json:
        _print_json([s.raw for s in streams])
        return 0
    rows = [
        [
            s.id,
            s.algorithm,
            s.kind,
            s.n_instances if s.kind == "features" else s.n_features,
            s.version,
            s.updated_at,
        ]
        for s in sorted(streams, key=lambda s: s.id)
    ]
    print(_table(["id", "algorithm", "kind", "size", "version", "updated_at"], rows))
    return 0


def _status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        status = client.stream(args.stream_id).status()
    if args.json:
        _print_json(status)
    else:
        print(_table(["counter", "value"], [[k, v] for k, v in status.items()]))
    return 0


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
    replay.add_argument("--algorithm", required=True, help="e.g. saola, osfs, ofs, fsds.")
    replay.add_argument(
        "--target",
        help="Target column (a name, or a position such as -1): required for feature-stream "
        "algorithms, the labels for supervised instance-stream ones.",
    )
    replay.add_argument("--params", default="{}", help="Algorithm parameters as a JSON object.")
    replay.add_argument(
        "--group-sep",
        metavar="SEP",
        help="For group algorithms (group_saola): a column's group is its name up to SEP.",
    )
    replay.add_argument("--stream-id", help="Id of the stream to create (default: generated).")
    replay.add_argument(
        "--chunk",
        type=int,
        help="Columns (feature streams; default 1000) or rows (instance streams; default 500) "
        "per request.",
    )
    replay.add_argument("--quiet", action="store_true", help="No progress bar.")
    replay.add_argument(
        "--progress",
        action="store_true",
        help="Show the progress bar even when stderr is not a terminal.",
    )
    _add_client_options(replay)
    replay.set_defaults(func=_client_command(_replay))

    selected = sub.add_parser("selected", help="A stream's current selection.")
    selected.add_argument("stream_id", metavar="ID")
    _add_client_options(selected)
    selected.set_defaults(func=_client_command(_selected))

    events = sub.add_parser(
        "events", help="A stream's decision log (--json: one JSON object per line)."
    )
    events.add_argument("stream_id", metavar="ID")
    events.add_argument("--after", help="Start after this event id.")
    events.add_argument("--limit", type=int, help="Print at most this many events.")
    events.add_argument("--follow", action="store_true", help="Keep printing new events.")
    events.add_argument(
        "--interval", type=float, default=1.0, help="Seconds between polls with --follow."
    )
    _add_client_options(events)
    events.set_defaults(func=_client_command(_events))

    streams = sub.add_parser("streams", help="Every stream on the server.")
    _add_client_options(streams)
    streams.set_defaults(func=_client_command(_streams))

    status = sub.add_parser("status", help="A stream's counters.")
    status.add_argument("stream_id", metavar="ID")
    _add_client_options(status)
    status.set_defaults(func=_client_command(_status))


__all__ = ["CliError", "add_commands", "load_table", "split_target"]
