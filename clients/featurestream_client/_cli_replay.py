"""``featurestream replay``: send a data file to a stream and print its selection.

Columns go to a feature stream (whole groups of them to a group algorithm),
rows to an instance stream; ``--append`` adds them to an existing stream.
"""

from __future__ import annotations

import argparse
import sys

from featurestream_client import _cli_inputs
from featurestream_client._cli_output import Progress, print_json, selection_json, selection_table
from featurestream_client._files import CliError, Matrix
from featurestream_client.client import Stream
from featurestream_client.errors import EvaluationUnavailable


def _group_columns(names: list[str], sep: str | None) -> dict[str, list[int]] | None:
    """Column positions per group (the name's part before ``sep``), groups in order of arrival."""
    if sep is None:
        return None
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name.split(sep, 1)[0], []).append(i)
    return groups


def run_replay(args: argparse.Namespace) -> int:
    params = _cli_inputs.parse_params(args.params)
    if args.chunk is not None and args.chunk < 1:
        raise CliError(f"--chunk must be >= 1; got {args.chunk}.")
    if args.append and args.stream_id is None:
        raise CliError("--append needs --stream-id ID (the stream to add to).")
    # The file first: a bad file is refused before the server is asked anything.
    table = _cli_inputs.read_table(args)
    with _cli_inputs.connect(args) as client:
        stream: Stream
        if args.append:
            stream = client.get_stream(args.stream_id)
            info = stream.refresh()
            if args.algorithm is not None and args.algorithm != info.algorithm:
                raise CliError(
                    f"stream {info.id} runs {info.algorithm}, not {args.algorithm}: leave "
                    "--algorithm out with --append, or give the stream's."
                )
            algorithm = _cli_inputs.find_algorithm(client, info.algorithm)
        elif args.algorithm is None:
            raise CliError("give --algorithm (or --append --stream-id ID to add to a stream).")
        else:
            algorithm = _cli_inputs.find_algorithm(client, args.algorithm)
        features = algorithm.kind == "features"
        if features and args.target is None and not args.append:
            raise CliError(f"{algorithm.name} selects over feature columns: give --target COL.")
        if not features and algorithm.supervised and args.target is None:
            raise CliError(
                f"{algorithm.name} learns from labelled rows: give --target COL (the label column)."
            )
        if not args.append:
            _cli_inputs.check_required(algorithm, params)
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
            "labels": _cli_inputs.parse_labels(args.label),
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
        print_json(
            {
                "stream": stream.id,
                "algorithm": algorithm.name,
                "kind": algorithm.kind,
                "version": selection.version,
                "score_kind": algorithm.score_kind_for(params),
                "higher_is_better": algorithm.higher_is_better,
                "selected": selection_json(selection),
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
        print(selection_table(selection, algorithm, params))
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
