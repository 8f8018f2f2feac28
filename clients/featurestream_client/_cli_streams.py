"""The stream commands: ``create``, ``delete``, ``selected``, ``streams`` and ``status``."""

from __future__ import annotations

import argparse
import sys

from featurestream_client._cli_inputs import (
    algorithm_of,
    check_required,
    connect,
    find_algorithm,
    parse_labels,
    parse_params,
    read_table,
)
from featurestream_client._cli_output import (
    format_table,
    print_json,
    selection_json,
    selection_table,
    stream_size,
)
from featurestream_client._files import CliError
from featurestream_client.errors import StreamNotFound


def run_create(args: argparse.Namespace) -> int:
    params = parse_params(args.params)
    with connect(args) as client:
        algorithm = find_algorithm(client, args.algorithm)
        check_required(algorithm, params)
        target = names = None
        if args.data is not None:
            table = read_table(args)
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
            labels=parse_labels(args.label),
            ttl_seconds=args.ttl,
        )
        info = stream.refresh()
    if args.json:
        print_json(info.raw)
    else:
        print(f"created {info.id} ({info.algorithm}, {stream_size(info)})")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    failed = 0
    with connect(args) as client:
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
        print_json({"deleted": len(args.stream_ids) - failed, "missing": failed})
    return 1 if failed else 0


def run_selected(args: argparse.Namespace) -> int:
    with connect(args) as client:
        selection = client.stream(args.stream_id).selected()
        algorithm, params = algorithm_of(client, args.stream_id)
    if args.json:
        print_json(
            {
                "stream": args.stream_id,
                "version": selection.version,
                "updated_at": selection.updated_at,
                "score_kind": None if algorithm is None else algorithm.score_kind_for(params),
                "higher_is_better": None if algorithm is None else algorithm.higher_is_better,
                "features": selection_json(selection),
            }
        )
    else:
        print(
            f"stream {args.stream_id}, version {selection.version}: "
            f"{len(selection.features)} selected"
        )
        print(selection_table(selection, algorithm, params))
    return 0


def run_streams(args: argparse.Namespace) -> int:
    with connect(args) as client:
        streams = client.streams()
    if args.json:
        print_json([s.raw for s in streams])
        return 0
    rows = [
        [s.id, s.algorithm, s.kind, stream_size(s), s.version, s.updated_at]
        for s in sorted(streams, key=lambda s: s.id)
    ]
    print(format_table(["id", "algorithm", "kind", "size", "version", "updated_at"], rows))
    print(
        "size: a feature stream's instances (the rows of each column it takes); an instance "
        "stream's features (the width of each row it takes)."
    )
    return 0


def run_status(args: argparse.Namespace) -> int:
    with connect(args) as client:
        status = client.stream(args.stream_id).status()
    if args.json:
        print_json(status)
    else:
        print(format_table(["counter", "value"], [[k, v] for k, v in status.items()]))
    return 0
