"""What the client commands read from their options, checked before any write.

The client built from ``--url``, ``--api-key`` and ``--timeout``; the data
file read as ``--target``, ``--drop``, ``--delimiter`` and ``--encoding`` say;
``--params`` and ``--label`` parsed; the algorithm looked up in the server's catalogue and
its required parameters checked.
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from featurestream_client._files import CliError, Table, load_table
from featurestream_client.client import Client
from featurestream_client.models import Algorithm


def algorithm_of(client: Client, stream_id: str) -> tuple[Algorithm | None, dict[str, Any]]:
    """The catalogue entry of a stream's algorithm, and the stream's parameters."""
    info = client.stream(stream_id).refresh()
    by_name = {a.name: a for a in client.algorithms()}
    return by_name.get(info.algorithm), dict(info.params)


def connect(args: argparse.Namespace) -> Client:
    return Client(args.url, api_key=args.api_key, timeout=args.timeout)


def parse_params(text: str) -> dict[str, Any]:
    try:
        params = json.loads(text)
    except ValueError as exc:
        raise CliError(f"--params is not valid JSON: {exc}.") from None
    if not isinstance(params, dict):
        raise CliError("--params must be a JSON object, e.g. '{\"alpha\": 0.05}'.")
    return params


def parse_labels(pairs: Sequence[str] | None) -> dict[str, str] | None:
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


def find_algorithm(client: Client, name: str) -> Algorithm:
    algorithms = {a.name: a for a in client.algorithms()}
    algorithm = algorithms.get(name)
    if algorithm is None:
        close = difflib.get_close_matches(name.lower(), list(algorithms), n=3)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise CliError(
            f"unknown algorithm {name!r}; the server hosts {', '.join(sorted(algorithms))}.{hint}"
        )
    return algorithm


def check_required(algorithm: Algorithm, params: Mapping[str, Any]) -> None:
    """Refuse, before anything is created, parameters the algorithm cannot do without."""
    schema = algorithm.params_schema
    missing = [p for p in schema.get("required", ()) if p not in params]
    if not missing:
        return
    props = schema.get("properties", {})
    example = {p: 10 if props.get(p, {}).get("type") == "integer" else "..." for p in missing}
    what = "; ".join(f"{p} ({props.get(p, {}).get('description', 'required')})" for p in missing)
    raise CliError(f"{algorithm.name} needs {what}: add --params '{json.dumps(example)}'.")


def read_table(args: argparse.Namespace) -> Table:
    """The data file ``args.data``, read as its file options say."""
    return load_table(
        args.data,
        target=args.target,
        drop=args.drop or (),
        delimiter=args.delimiter,
        encoding=args.encoding,
    )
