"""The client commands of the ``featurestream`` command line.

``replay``, ``create``, ``delete``, ``selected``, ``events``, ``streams`` and ``status`` talk to a
running server through :class:`~featurestream_client.Client`: human tables by
default, ``--json`` for scripts. Errors are one line on stderr and a non-zero
exit status. The ``featurestream`` entry point adds them (:func:`add_commands`)
beside the server's ``serve`` and ``bench``, so that one command offers all.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from featurestream_client._base import DEFAULT_URL
from featurestream_client._files import CliError, Matrix, load_table, split_target
from featurestream_client.client import Client, Stream
from featurestream_client.errors import (
    ConnectionFailed,
    EvaluationUnavailable,
    FeatureStreamError,
    StreamNotFound,
    type_suffix,
)
from featurestream_client.models import Algorithm, Selection, StreamInfo


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


def _params(text: str) -> dict[str, Any]:
    try:
        params = json.loads(text)
    except ValueError as exc:
        raise CliError(f"--params is not valid JSON: {exc}.") from None
    if not isinstance(params, dict):
        raise CliError("--params must be a JSON object, e.g. '{\"alpha\": 0.05}'.")
    return params


def _labels(pairs: Sequence[str] | None) -> dict[str, str] | None:
    """``--label k=v`` options as a map (None when there are none)."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--label takes KEY=VALUE; got {pair!r}.")
        out[key] = value
    return out


def _algorithm(client: Client, name: str) -> Algorithm:
    algorithms = {a.name: a for a in client.algorithms()}
    algorithm = algorithms.get(name)
    if algorithm is None:
        close = difflib.get_close_matches(name.lower(), list(algorithms), n=3)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise CliError(
            f"unknown algorithm {name!r}; the server hosts {', '.join(sorted(algorithms))}.{hint}"
        )
    return algorithm


def _check_required(algorithm: Algorithm, params: Mapping[str, Any]) -> None:
    """Refuse, before anything is created, parameters the algorithm cannot do without."""
    schema = algorithm.params_schema
    missing = [p for p in schema.get("required", ()) if p not in params]
    if not missing:
        return
    props = schema.get("properties", {})
    example = {p: 10 if props.get(p, {}).get("type") == "integer" else "..." for p in missing}
    what = "; ".join(f"{p} ({props.get(p, {}).get('description', 'required')})" for p in missing)
    raise CliError(f"{algorithm.name} needs {what}: add --params '{json.dumps(example)}'.")


def _replay(args: argparse.Namespace) -> int:
    params = _params(args.params)
    if args.chunk is not None and args.chunk < 1:
        raise CliError(f"--chunk must be >= 1; got {args.chunk}.")
    if args.append and args.stream_id is None:
        raise CliError("--append needs --stream-id ID (the stream to add to).")
    # The file first: a bad file is refused before the server is asked anything.
    table = load_table(
        args.data,
        target=args.target,
        drop=args.drop or (),
        delimiter=args.delimiter,
        encoding=args.encoding,
    )
    with _client(args) as client:
        stream: Stream
        if args.append:
            stream = client.get_stream(args.stream_id)
            info = stream.refresh()
            if args.algorithm is not None and args.algorithm != info.algorithm:
                raise CliError(
                    f"stream {info.id} runs {info.algorithm}, not {args.algorithm}: leave "
                    "--algorithm out with --append, or give the stream's."
                )
            algorithm = _algorithm(client, info.algorithm)
        elif args.algorithm is None:
            raise CliError("give --algorithm (or --append --stream-id ID to add to a stream).")
        else:
            algorithm = _algorithm(client, args.algorithm)
        features = algorithm.kind == "features"
        if features and args.target is None and not args.append:
            raise CliError(f"{algorithm.name} selects over feature columns: give --target COL.")
        if not features and algorithm.supervised and args.target is None:
            raise CliError(
                f"{algorithm.name} learns from labelled rows: give --target COL (the label column)."
            )
        if not args.append:
            _check_required(algorithm, params)
        names, matrix, y = table.names, table.data, table.target
        if not names:
            raise CliError(f"{args.data}: no feature columns besides the target.")
        if features and args.append and y is not None and len(y) != stream.refresh().n_instances:
            raise CliError(f"{args.data} has {len(y)} rows; stream {stream.id} has others.")
        show = not args.quiet and (args.progress or sys.stderr.isatty())
        groups = _group_columns(names, args.group_sep) if algorithm.supports_groups else None
        if algorithm.supports_groups and groups is None:
            raise CliError(
                f"{algorithm.name} decides whole groups of columns: give --group-sep SEP "
                "(the group of column 'g1.age' with --group-sep . is 'g1')."
            )
        options = {
            "id": args.stream_id,
            "target_type": args.target_type,
            "labels": _labels(args.label),
            "ttl_seconds": args.ttl,
        }
        if groups is not None:
            if not args.append:
                stream = client.create_stream(algorithm.name, target=y, params=params, **options)
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
        elif features:
            if not args.append:
                stream = client.create_stream(algorithm.name, target=y, params=params, **options)
            chunk = args.chunk or 1000
            progress = Progress(len(names), "columns", sys.stderr, show)
            progress.update(0)
            for lo in range(0, len(names), chunk):
                hi = min(lo + chunk, len(names))
                stream.add_features(matrix[:, lo:hi], names[lo:hi], chunk_columns=chunk)
                progress.update(hi)
        else:
            if not args.append:
                stream = client.create_stream(
                    algorithm.name, feature_names=names, params=params, **options
                )
            else:
                matrix = _aligned_rows(stream, names, matrix)
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
        status = stream.status() if not features else {}
        # Supervised instance streams predict each row before learning it
        # (test-then-train); a selector without a mistake counter (FIRES) reports its
        # prequential evaluation.
        mistakes = status.get("mistakes")
        seen = status.get("instances_seen")
        needs = mistakes is None and not features and y is not None
        accuracy = _prequential(stream) if needs else None
    if args.json:
        _print_json(
            {
                "stream": stream.id,
                "algorithm": algorithm.name,
                "kind": algorithm.kind,
                "version": selection.version,
                "score_kind": algorithm.score_kind_for(params),
                "higher_is_better": algorithm.higher_is_better,
                "selected": _selection_json(selection),
                **({} if mistakes is None else {"mistakes": mistakes, "instances_seen": seen}),
                **({} if accuracy is None else {"prequential_accuracy": accuracy[0]}),
            }
        )
    else:
        total = f"{len(names)} features" if features else f"{matrix.shape[0]} rows"
        verb = "appended to" if args.append else "stream"
        print(
            f"{verb} {stream.id} ({algorithm.name}, {total}), version {selection.version}: "
            f"{len(selection.features)} selected"
        )
        if mistakes is not None and seen:
            print(
                f"prequential mistakes (each row predicted before it is learnt): {mistakes} of "
                f"{seen} rows ({100 * mistakes / seen:.1f}%)"
            )
        if accuracy is not None:
            print(
                "prequential accuracy (each row predicted before it is learnt): "
                f"{accuracy[0]:.4f} over {accuracy[1]} rows"
            )
        print(_selection_table(selection, algorithm, params))
    return 0


def _prequential(stream: Stream) -> tuple[float, int] | None:
    """The stream's prequential accuracy and the rows it covers; None where it has none."""
    try:
        ev = stream.evaluation()
    except EvaluationUnavailable:
        return None
    if ev.kind != "prequential" or ev.score is None:
        return None
    return ev.score, int(ev.raw.get("instances", 0))


def _aligned_rows(stream: Stream, names: list[str], matrix: Matrix) -> Matrix:
    """The file's columns in the order of the stream's features (matched by name)."""
    expected = stream.refresh().feature_names
    if expected is None or list(expected) == names:
        return matrix
    unseen = [n for n in names if n not in set(expected)]
    missing = [n for n in expected if n not in set(names)]
    if unseen or missing:
        raise CliError(
            f"the file's columns do not match stream {stream.id}'s features: unseen "
            f"{unseen or '-'}, missing {missing or '-'} (--drop the extra columns)."
        )
    return matrix[:, [names.index(n) for n in expected]]


def _create(args: argparse.Namespace) -> int:
    params = _params(args.params)
    with _client(args) as client:
        algorithm = _algorithm(client, args.algorithm)
        _check_required(algorithm, params)
        target = names = None
        if args.data is not None:
            table = load_table(
                args.data,
                target=args.target,
                drop=args.drop or (),
                delimiter=args.delimiter,
                encoding=args.encoding,
            )
            target, names = table.target, table.names
        if args.feature_names is not None:
            names = [n.strip() for n in args.feature_names.split(",")]
        if algorithm.kind == "features":
            if target is None:
                raise CliError(
                    f"{algorithm.name} streams need a target: give --data FILE --target COL."
                )
            names = None
        elif names is None:
            raise CliError(
                f"{algorithm.name} streams need their feature names: give --feature-names "
                "a,b,c or --data FILE (its header)."
            )
        else:
            target = None
        stream = client.create_stream(
            algorithm.name,
            target=target,
            feature_names=names,
            params=params,
            id=args.stream_id,
            target_type=args.target_type,
            labels=_labels(args.label),
            ttl_seconds=args.ttl,
        )
        info = stream.refresh()
    if args.json:
        _print_json(info.raw)
    else:
        print(f"created {info.id} ({info.algorithm}, {_size(info)})")
    return 0


def _delete(args: argparse.Namespace) -> int:
    failed = 0
    with _client(args) as client:
        for sid in args.stream_ids:
            try:
                client.delete_stream(sid)
            except StreamNotFound:
                print(f"featurestream delete: stream {sid} does not exist", file=sys.stderr)
                failed += 1
                continue
            if not args.json:
                print(f"deleted {sid}")
    if args.json:
        _print_json({"deleted": len(args.stream_ids) - failed, "missing": failed})
    return 1 if failed else 0


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


def _events(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be >= 1; got {args.limit}.")
    if args.interval < MIN_INTERVAL:
        raise CliError(f"--interval must be >= {MIN_INTERVAL} seconds; got {args.interval}.")
    # Ctrl-C (how one stops following) ends it without a traceback, status 130.
    with _client(args) as client:
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
        print(_table(EVENT_COLUMNS, [_event_row(e) for e in events]))
    else:
        header = zip(EVENT_COLUMNS, EVENT_WIDTHS, strict=True)
        print("  ".join(h.ljust(w) for h, w in header).rstrip(), flush=True)
        for event in events:
            cells = zip(_event_row(event), EVENT_WIDTHS, strict=True)
            print("  ".join(_cell(v).ljust(w) for v, w in cells).rstrip(), flush=True)


def _size(s: StreamInfo) -> str:
    """What a stream holds, with its unit: the rows of a feature stream's columns, or the
    features of an instance stream's rows."""
    if s.kind == "features":
        return "-" if s.n_instances is None else f"{s.n_instances} rows"
    return "-" if s.n_features is None else f"{s.n_features} features"


def _streams(args: argparse.Namespace) -> int:
    with _client(args) as client:
        streams = client.streams()
    if args.json:
        _print_json([s.raw for s in streams])
        return 0
    rows = [
        [s.id, s.algorithm, s.kind, _size(s), s.version, s.updated_at]
        for s in sorted(streams, key=lambda s: s.id)
    ]
    print(_table(["id", "algorithm", "kind", "size", "version", "updated_at"], rows))
    print(
        "size: a feature stream's instances (the rows of each column it takes); an instance "
        "stream's features (the width of each row it takes)."
    )
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
    replay.set_defaults(func=_client_command(_replay))

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
    create.set_defaults(func=_client_command(_create))

    delete = sub.add_parser("delete", help="Delete streams and everything they hold.")
    delete.add_argument("stream_ids", metavar="ID", nargs="+")
    _add_client_options(delete)
    delete.set_defaults(func=_client_command(_delete))

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
    events.set_defaults(func=_client_command(_events))

    streams = sub.add_parser("streams", help="Every stream on the server.")
    _add_client_options(streams)
    streams.set_defaults(func=_client_command(_streams))

    status = sub.add_parser("status", help="A stream's counters.")
    status.add_argument("stream_id", metavar="ID")
    _add_client_options(status)
    status.set_defaults(func=_client_command(_status))


__all__ = ["CliError", "add_commands", "load_table", "split_target"]
