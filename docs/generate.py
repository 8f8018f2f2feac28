"""Regenerate the generated parts of the documentation.

* ``docs/api.md``: the HTTP API reference, from the app's OpenAPI schema, its
  WebSocket routes and the problem table of ``featurestream.api.problems``;
* the settings table of ``docs/operations.md`` (between the ``settings-table``
  markers), from ``featurestream.config.Settings`` and ``featurestream serve``.

Run from the repository root::

    python docs/generate.py          # rewrite the files
    python docs/generate.py --check  # exit 1 when a file is stale

``tests/docs`` fails when the committed files differ from what this writes.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from featurestream.api import create_app, problems
from featurestream.cli import build_parser
from featurestream.config import Settings

DOCS = Path(__file__).resolve().parent
API_MD = DOCS / "api.md"
OPERATIONS_MD = DOCS / "operations.md"
SETTINGS_START = "<!-- settings-table:start -->"
SETTINGS_END = "<!-- settings-table:end -->"

# FastAPI's default validation schemas: featurestream answers every error with an
# RFC 9457 problem document instead (see "Errors").
_HIDDEN_SCHEMAS = {"HTTPValidationError", "ValidationError"}
_METHODS = ("get", "post", "put", "patch", "delete")

# Meaning of settings whose Field has no description.
_SETTING_NOTES = {
    "host": "Bind address; 0.0.0.0 in containers.",
    "port": "TCP port of the HTTP/WebSocket server.",
    "redis_socket_timeout": "Seconds a Redis command may take before the store counts as "
    "unavailable (503).",
    "redis_connect_timeout": "Seconds to wait for a connection to Redis.",
    "redis_max_connections": "Size of each process's Redis connection pool.",
    "log_level": "uvicorn log level: critical, error, warning, info or debug.",
}
# ``featurestream serve`` options whose destination is not the setting's name.
_OPTION_FIELDS = {"store": "store_url"}


# --------------------------------------------------------------------------- helpers


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _anchor(name: str) -> str:
    return name.lower()


def _bounds(schema: dict[str, Any]) -> list[str]:
    out = []
    for key, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if key in schema:
            out.append(f"{sign} {schema[key]}")
    if "minItems" in schema:
        out.append(f"at least {schema['minItems']} items")
    if "minLength" in schema or "maxLength" in schema:
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        out.append(f"{lo}-{hi} chars" if hi is not None else f"at least {lo} chars")
    if "pattern" in schema:
        out.append(f"matching `{schema['pattern']}`")
    return out


def type_of(schema: dict[str, Any]) -> str:
    """A short human reading of a JSON schema."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(type_of(s) for s in schema[key])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type")
    if kind == "array":
        text = f"array of {type_of(schema.get('items', {}))}"
    elif kind == "object":
        extra = schema.get("additionalProperties")
        text = f"object of {type_of(extra)}" if isinstance(extra, dict) and extra else "object"
    elif kind == "string" and schema.get("format") == "binary":
        text = "binary"
    elif kind is None:
        text = "any"
    else:
        text = str(kind)
    bounds = _bounds(schema)
    return f"{text} ({', '.join(bounds)})" if bounds else text


# --------------------------------------------------------------------------- api.md


def _operation(lines: list[str], method: str, path: str, op: dict[str, Any]) -> None:
    lines += [f"### `{method.upper()} {path}`", ""]
    text = op.get("description") or op.get("summary", "")
    if text:
        lines += [text.replace("``", "`").strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += [
            "| parameter | in | required | type | description |",
            "|---|---|---|---|---|",
        ]
        for p in params:
            schema = p.get("schema", {})
            notes = [p.get("description", "")]
            if "default" in schema:
                notes.append(f"Default `{json.dumps(schema['default'])}`.")
            lines.append(
                f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                f"{_cell(type_of(schema))} | {_cell(' '.join(n for n in notes if n)) or '-'} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        parts = [
            f"`{media}`: {type_of(content.get('schema', {}))}"
            for media, content in body.get("content", {}).items()
        ]
        required = "required" if body.get("required") else "optional"
        lines += [f"Request body ({required}): " + "; ".join(parts) + ".", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, resp in sorted(op.get("responses", {}).items()):
        content = resp.get("content", {})
        meaning = resp.get("description", "")
        if problems.PROBLEM_MEDIA_TYPE in content:
            body_text = "[problem](#errors)"
        else:
            body_text = "; ".join(
                f"`{media}` {type_of(c.get('schema', {}))}".strip() for media, c in content.items()
            )
        lines.append(f"| {status} | {_cell(meaning)} | {_cell(body_text) or '-'} |")
    lines.append("")


_CLOSE_MEANINGS = {
    "WS_1000_NORMAL_CLOSURE": "the client or the server ended the session normally",
    "WS_1001_GOING_AWAY": "the server is shutting down (frames read were answered first)",
    "WS_1008_POLICY_VIOLATION": (
        "unknown stream, invalid query, a fatal sequence conflict, a stored state "
        "that is not finite (`numerically-unstable`), or the API key was revoked "
        "(after the frames already read are answered)"
    ),
    "WS_1011_INTERNAL_ERROR": "server error",
    "WS_1013_TRY_AGAIN_LATER": "the store is unavailable, hung or full, the server is "
    "shutting down, or the client read nothing for `ws_send_timeout` seconds (reason "
    "`slow reader`): retry",
}


def _websockets(lines: list[str]) -> None:
    from fastapi.routing import APIWebSocketRoute

    from featurestream.api import ws

    found = [r for r in ws.router.routes if isinstance(r, APIWebSocketRoute)]
    if not found:
        return
    lines += ["## WebSocket", ""]
    for route in sorted(found, key=lambda r: r.path):
        summary = (inspect.getdoc(route.endpoint) or "").split("\n\n")[0]
        lines += [f"### `WS {route.path}?producer=<name>&seq=<k>`", ""]
        if summary:
            lines += [summary.replace("``", "`"), ""]
        lines += [
            "Frames sent on one connection are numbered consecutively from `seq`",
            "(default: the producer's next expected seq), exactly like the `seq` of",
            "HTTP requests, so a client that reconnects resumes with its last ack + 1",
            "and frames already applied are acknowledged again without being",
            're-applied. A frame is a JSON text frame `{"X": [[...]], "y": [...]}` or',
            '`{"x": [...], "y": 1}`, or a binary frame holding an `.npy` array or, for',
            "sparse instances, a `scipy.sparse.save_npz` matrix (a zip, m x d; OFS reads",
            "it in O(non-zeros) per instance); labels in the last column for supervised",
            "selectors. `POST .../instances` takes the same `.npz` body as",
            "`application/x-npz` (with `X-Label-Column: last` for labels).",
            "",
            "With API keys on, the key comes in the `Authorization: Bearer` header, as",
            "`?token=<key>`, or, with `?auth=message`, as the connection's first message",
            '`{"type": "auth", "key": "<key>"}`, sent within 10 s (the web page does',
            "this: browsers cannot set headers on a WebSocket, and a key in a URL ends",
            "up in logs and history). Until that message the server sends nothing; a",
            "first message that is anything else, a wrong key, or none in time is an",
            "`error` (401) and close code 1008, and changes nothing. Without keys the",
            "auth message is read and its key ignored. `auth` takes no other value (422).",
            "",
            "| message | when |",
            "|---|---|",
            '| `{"type": "ack", "ack": <seq>, "version": ..., "instances_seen": ...}` '
            "| a frame is committed (in order) |",
            '| `{"type": "selection", "selected": [...], "version": ..., '
            '"features": [...]}` | on connect, and whenever the selected set changes |',
            '| `{"type": "selection", "version": ..., "size": <n>, "truncated": true}` '
            "| instead, when more than `ws_selection_max_features` features are selected: "
            "read them with `GET .../selected` |",
            '| `{"type": "selection", ..., "producer": <name>, "seq": <k>}` '
            "| the first message: the connection's producer (its own `ws-<uuid>` when the "
            "query names none) and the seq of its first frame, to resume with |",
            '| `{"type": "error", "error": {problem}, "seq": <seq>}` '
            "| a bad frame: it changes nothing but uses up its seq |",
            "",
            "What the server holds for a connection is bounded, however slowly its",
            "client reads. A `selection` message lists at most",
            "`ws_selection_max_features` features (default 1,000); a larger selection",
            "is announced by a notice of its version and size (`truncated: true`), the",
            "first message too, and the client reads it with `GET .../selected` (the",
            "Python client and the web page do). Selection messages are snapshots: a",
            "client that reads more slowly than the selection changes gets the newest",
            "one, not every version in between. A message that waits longer than",
            "`ws_send_timeout` seconds (default 30) for a client that reads nothing",
            "closes the connection (1013, `slow reader`).",
            "",
        ]
        module = sys.modules[route.endpoint.__module__]
        # The close codes the endpoint's module names (starlette's WS_* constants).
        codes = sorted(
            (value, name)
            for name, value in vars(module).items()
            if name.startswith("WS_") and isinstance(value, int)
        )
        if codes:
            lines += ["| close code | meaning |", "|---|---|"]
            for value, name in codes:
                lines.append(f"| {value} | {_CLOSE_MEANINGS.get(name, name)} |")
            lines.append("")


def _array_bodies(lines: list[str]) -> None:
    lines += [
        "## Array bodies and frames",
        "",
        "`.npy` and `.npz` bodies (and binary WebSocket frames) are checked in full",
        "before anything is allocated, inflated or applied; none is ever unpickled.",
        "",
        "* `.npy`: format version 1.0 or 2.0; a plain dtype of integers or floats (either",
        "  byte order; bool, complex, str, object and structured dtypes are refused); C or",
        "  Fortran order; 1-D or 2-D; the bytes after the header are exactly those of the",
        "  declared shape, no more, no fewer.",
        "* `.npz`: `scipy.sparse.save_npz` of a `csr`, `csc` or `coo` matrix (`bsr` and",
        "  `dia` are refused), its members stored or deflated, and no member but those",
        "  `save_npz` writes (and `names.npy` for feature columns). Index arrays are of",
        "  integers; `indptr` has one entry per row (csr) or column (csc) plus one,",
        "  starts at 0, never decreases and ends at the number of values, which",
        "  `indices` and `data` both hold; every index is in `[0, dimension)`. Repeated",
        "  positions are summed.",
        "* Limits, on what the body declares: the members' uncompressed sizes, as the",
        "  zip directory states them (a member inflates no further), together at most",
        "  `max_request_bytes` (413 `limit-exceeded`, `limit: max_request_bytes`); a",
        "  batch of instances at most `max_instances_per_request` rows and",
        "  `max_columns_per_request` + 1 columns (the label), feature columns at most",
        "  `max_columns_per_request` (413 `limit-exceeded`, naming the setting); no",
        "  dimension above 2^40.",
        "* Anything else (not a zip, a truncated or corrupt archive, an unsupported zip",
        "  version or compression, a bad header, an index out of range) is a 422",
        "  `invalid-input` whose `errors[].field` is `body` or `body:<member>`; on a",
        "  WebSocket, the frame's `error` message.",
        "",
        "A request body must arrive whole within `body_timeout` seconds of its first",
        "read, however it is paced (408 `request-timeout`). With API keys, a request",
        "that carries a body without a valid key is answered 401 before any of the",
        "body is read.",
        "",
        "In `GET .../events?after=<version>-<index>`, both numbers are below 2^63",
        "(422 `invalid-input`, `field: after`, beyond).",
        "",
    ]


def _writes(lines: list[str]) -> None:
    lines += [
        "## Producers and `seq`",
        "",
        "Every write (features, groups, instances, WebSocket frames) may name its",
        "producer and number itself with `seq`: the headers `X-Producer` / `X-Seq` for",
        "every body type, the body fields `producer` / `seq` for JSON; a request that",
        "gives both must give the same values (else `422`). A producer name is 1-256",
        "characters without control characters, the whole value matched, in every",
        "channel (body, header, WebSocket query); anything else is `422` naming the",
        "field. An HTTP write that names no producer writes as `default`; a WebSocket",
        "that names none gets one of its own (`ws-<uuid>`).",
        "",
        "* A `seq` already applied, sent again with the same content, is answered with",
        "  the stored response (`Idempotent-Replay: true`) and applies nothing.",
        "* The same `seq` with other content (two writers sharing a producer name) is",
        '  `409` `/problems/seq-reused` ("seq reused with different content") and',
        "  applies nothing: no write is ever acknowledged with another write's answer.",
        "* Unnamed columns are named `<producer>:<seq>:<i>` (without a `seq`:",
        "  `v<version>:<i>`).",
        "* A write with nothing in it (no columns, no instances, a frame of no rows)",
        "  is acknowledged with the stream's current version: no new version, no event.",
        "  With a `seq` it uses the seq up like any write, so a replay answers alike.",
        "* `503` `/problems/store-unavailable` means the outcome is unknown: the write",
        "  may have been applied. Retry it only with a `seq` (the same one): that is",
        "  always safe, the server applies it at most once.",
        "* `503` `/problems/compute-unavailable`: the compute worker that applied the",
        "  write stopped before answering; nothing was committed, and another worker",
        "  takes its place. Retry it like any 503 (with the same `seq`).",
        "",
    ]


def _consuming(lines: list[str]) -> None:
    lines += [
        "## Consuming from a log",
        "",
        "`featurestream consume SOURCE` (in Python: `featurestream.ingest.consume`) reads",
        "a log in a consumer group and applies each message to its stream through the",
        "same engine as the HTTP writes, with the server's settings (`FEATURESTREAM_*`,",
        "`--store`) and as one tenant (`--tenant`; none by default).",
        "",
        "* `redis-stream://host:port/db?key=K&group=G`: Redis Streams. Repeat `key=`",
        "  (or give `key=K1,K2`) for several partitions. Options: `claim=` (seconds,",
        "  default 30: a consumer's lease on a key, and how long an entry stays pending",
        "  with a consumer before another claims it), `count=` (entries per read, 100),",
        "  `block=` (seconds a read waits, 1), `dead=` (the dead-letter key, default",
        "  `<key>:dead`), `dead_max=` (dead letters kept per key, 100000).",
        "* `nats://host:port/STREAM?consumer=C`: NATS JetStream (the `consume` extra,",
        "  nats-py). `C` is a durable pull consumer of the stream (made if missing, with",
        "  explicit acknowledgements and `ack_wait` = `claim`). Options: `claim=`",
        "  (seconds, default 30), `count=` (messages per fetch, 100), `block=` (seconds a",
        "  fetch waits, 1), `dead=` (the dead-letter subject, default `<STREAM>.dead`,",
        "  kept by a stream `<STREAM>-dead` made for it when no stream keeps it).",
        "* `kafka://host:port[,host:port]/TOPIC?group=G`: Kafka (the `consume` extra,",
        "  confluent-kafka). The group owns the partitions; offsets are committed after",
        "  the commit, never automatically. Options: `count=` (records per poll, 100),",
        "  `block=` (seconds a poll waits, 1), `dead=` (the dead-letter topic, default",
        "  `<TOPIC>.dead`).",
        "",
        "A message carries what an HTTP write carries. A Redis Streams entry has the",
        "fields `stream` (the stream id), `kind` (`features`, `groups` or `instances`),",
        "`content-type` (`application/json` by default, `application/x-npy`,",
        "`application/x-npz`), `body` (the bytes an HTTP write of that kind takes, e.g.",
        '`{"X": [[...]], "y": [...]}` for instances; an `.npy` or `.npz` body of',
        "instances carries the labels of a supervised stream in its last column, as a",
        "binary WebSocket frame does) and, optionally, `create` (the JSON body of",
        "`POST /v1/streams`, used when the stream does not exist yet; its `id`, if any,",
        "is the message's stream). A body names no `producer` or `seq`. A NATS message",
        "carries the same as headers `stream`, `kind`, `content-type`, `create`, and the",
        "body as its data; a Kafka record has the stream id as its key, the headers",
        "`kind`, `content-type`, `create`, and the body as its value.",
        "",
        "Exactly once in effect. Each partition is a producer (`redis:<key>`,",
        "`nats:<stream>`, `kafka:<topic>:<partition>`) and each message's position in it",
        "the message's `seq`: a Redis entry `ms-n` has the position `ms * 2^20 + n` (an",
        "entry whose `n` is 2^20 or more is refused), a NATS message its stream sequence,",
        "a Kafka record its offset plus one. Positions",
        "increase but may skip (deleted entries, other streams' messages), so for these",
        "producers the sequence rule is: a `seq` above the producer's last applied one is",
        "applied, whatever the distance (never a gap), and one at or below it is a replay,",
        "answered from its stored response and applied no second time, or, when its",
        "response has left the replay window, taken as applied. A message is",
        "acknowledged only after the commit that applied it. Consecutive `instances`",
        "messages for one stream are applied as one commit, as WebSocket frames are.",
        "",
        "At most one consumer of a group reads a partition at a time (a lease renewed",
        "while it reads); Redis consumers share the keys, each taking at most its share.",
        "The holder of a Redis key claims (`XAUTOCLAIM`) the entries that another",
        "consumer left pending beyond `claim` seconds and applies them before anything",
        "newer; a NATS consumer that takes the lease over waits `claim` seconds, so that",
        "the messages its predecessor left unacknowledged are delivered again first.",
        "A Kafka consumer that loses a partition in a rebalance while applying it goes",
        "on in the partition's order, as its new owner does from the last committed",
        "offset: whichever comes second finds each record applied.",
        "",
        "A message that cannot be applied (a bad body, an unknown stream without",
        "`create`, any `4xx`) goes to the dead letters (`XADD` to `<key>:dead`, in the",
        "same transaction as its acknowledgement) with its own fields and `problem` (its",
        "problem document), `source` (the key), `position` (its entry id) and `group`;",
        "NATS publishes it to the dead-letter subject with its own headers and",
        "`Problem`, `Source`, `Position` (de-duplicated by position), then acknowledges",
        "it; Kafka produces it to the dead-letter topic with its key, headers, `problem`",
        "and `position` (`<partition>:<offset>`) before committing its offset (a dead",
        "letter may then be produced twice). Consumption goes on. While the store does",
        "not answer, nothing is acknowledged: the consumer pauses and applies the same",
        "messages once it answers.",
        "",
    ]


def _history(lines: list[str]) -> None:
    lines += [
        "## History, stability, evaluation",
        "",
        "Every event carries `at`, the commit time of its version (RFC 3339 UTC: the",
        "`updated_at` of the selection that version published). Events stored by a release",
        "that did not record it show `at: null`.",
        "",
        "**History.** Each entry of the event log also records how its commit moved the",
        "selected set: the names added and removed and the new size. Only a change of the",
        "set of names counts (a new order of the same names is not a change).",
        "",
        "* `GET .../selected?version=V` rebuilds the selection after version V backwards",
        "  from the current one. Names come in alphabetical order with `score` null (scores",
        "  are not kept in the log); `updated_at` is version V's commit time (V = 0: the",
        "  stream's creation). For the current version the answer is the selection document",
        "  itself (the selector's order, with scores). A version beyond the current one is",
        "  `404` `/problems/version-not-found` with `current_version`.",
        "* `410` `/problems/history-trimmed` with `oldest_version` when what it takes is no",
        "  longer there: the log keeps the last `event_retention` commits (version V's own",
        "  entry and every later one are needed), and entries stored before the log recorded",
        "  selection changes cannot be undone, so the history of an upgraded stream starts",
        "  after its last such entry.",
        "* `GET .../history?after_version=&limit=` lists the changes in version order:",
        '  `{"changes": [{"version", "at", "added", "removed", "size"}], "next",',
        '  "version"}`. Without `after_version` it starts at the oldest change kept; an',
        "  `after_version` older than the log keeps is `410`. A page looks through at most",
        "  2,000 log entries. `next` is the `after_version` that reads on, null once the page",
        "  reached the stream's `version` (to follow the stream, ask again later with",
        "  `after_version` = `version`).",
        "",
        "**Stability.** `GET .../stability?last=K` (K from 2 to 1,000, 20 by default) takes",
        "the selections after the last K changes of the history above (fewer when fewer are",
        "kept), oldest first, and answers their `versions` and `sizes`, `jaccard` (each",
        "selection against the next: shared names over all names, 1 for two empty",
        "selections) and `nogueira`, the estimator of Nogueira, Sechidis and Brown (JMLR",
        "2018): with M selections as rows of a 0/1 matrix over d features, p_f the share of",
        "selections holding feature f, s_f^2 = M/(M-1) p_f (1 - p_f) and k the mean",
        "selection size, Phi = 1 - mean_f(s_f^2) / ((k/d)(1 - k/d)). d is `features`: the",
        "features the stream had seen at the latest of those versions (a feature stream's",
        "columns received by then; an instance stream's feature space). Phi is 1 for",
        "identical selections and at least -1/(M-1). Edge cases, never NaN: fewer than two",
        "selections give `nogueira` null (and `jaccard` []); when every selection is empty",
        "or every one holds all d features the selections are identical and Phi is 1.",
        "",
        "**Evaluation.** `GET .../evaluation?model=&folds=&repeats=`: `model` is one of",
        "`knn`, `logistic`, `naive_bayes`, `linear` (else `422` naming them), `folds` 2-10",
        "(5 by default), `repeats` 1-10 (1).",
        "",
        "* Feature streams: the cross-validated score of the scikit-learn model on the",
        "  columns of the current selection, as they were sent. Class targets (`binary`,",
        "  `multiclass`) use `KNeighborsClassifier()`, `LogisticRegression(max_iter=1000)`",
        "  (`logistic` and `linear`) or `GaussianNB()` and score `accuracy` on",
        "  `StratifiedKFold` folds; continuous targets use `KNeighborsRegressor()`, `Ridge()`",
        "  (`logistic`), `LinearRegression()` (`linear`; `naive_bayes` is `422`) and score",
        "  `r2` on `KFold` folds. The scale-sensitive ones (the kNN models, logistic",
        "  regression, ridge) come as `make_pipeline(StandardScaler(), model)`: each column",
        "  is standardised with the mean and standard deviation of the training fold alone,",
        "  so a column on a large scale does not dominate and no test row leaks into the",
        "  fit; `GaussianNB()` and `LinearRegression()` do not depend on the columns' scale",
        "  and see them as they are. Folds are shuffled; repetition r uses `random_state` = the",
        "  first word of `numpy.random.SeedSequence([0, r]).generate_state(1)` (seed 0). Row",
        "  r of `fold_scores` (repetition-major, `folds` per repetition) is then exactly",
        "  scikit-learn's `cross_val_score(model, X[:, selected], y, cv=splitter)`; `score`",
        "  is their mean, `features` the selection's size, and `best_single` the single",
        "  selected feature with the best mean (`name`, `score`, `fold_scores`; the first in",
        "  selection order on a tie; null for an empty selection, which is scored by the",
        "  constant model: the most frequent class, or the mean). The columns must be kept:",
        "  SAOLA, and group-SAOLA with SU, keep the selected columns as sent; Grafting, and",
        "  OSFS, Fast-OSFS and group-SAOLA with the Fisher z test, keep them standardised",
        "  with the mean and scale of each, and they are restored from those (exact to",
        "  rounding; a stream stored before the scales were kept is scored once its older",
        "  members have left the selection). OSFS and Fast-OSFS with a discrete test",
        "  (integer codes) and alpha-investing (an orthonormal basis) keep no copy of the",
        "  columns as sent: `422` `/problems/evaluation-unavailable` (with `algorithm`).",
        "  Results are cached per stream, version and query, and computed in a worker",
        "  thread, one at a time per process. The cost is bounded: rows x (features + 1) x",
        "  folds x repeats at most 20,000,000, and knn on at most 20,000 rows; beyond, `413`",
        "  `/problems/limit-exceeded`. A class with fewer rows than folds is `422`.",
        "* Supervised instance streams (OFS, FIRES): the prequential (test-then-train)",
        "  accuracy: every instance is predicted by the model the selector holds before",
        "  learning it (OFS: the sign of w . x before its step; FIRES: the model before the",
        "  batch, on the batch as its update sees it; multi-class: the class of the largest",
        "  mean). `instances` predicted, `accuracy` over all of them and `recent`",
        "  (`window` 1,000, `instances`, `accuracy`) over the last 1,000; accuracies are",
        "  null before any instance. Counting changes nothing of what the selector learns.",
        "  A state stored before the counters existed starts them empty: they count from",
        "  its next batch. `model`, `folds` and `repeats` are checked, not used.",
        "* Unsupervised streams (FSDS, NRFS) make no predictions: `422`",
        "  `/problems/evaluation-unavailable`.",
        "",
    ]


def _errors(lines: list[str]) -> None:
    lines += [
        "## Errors",
        "",
        "Every error is an RFC 9457 problem document (`application/problem+json`) with",
        "`type`, `title`, `status` and `detail`, plus the error's own fields (for example",
        "`expected_seq` of a sequence conflict). Validation errors list the offending",
        "fields in `errors` (`field`, `message`); a field is a path in one style,",
        "`features[0].values[2]` (object keys after dots, list positions in brackets).",
        "Malformed JSON is a `400` `/problems/malformed-body` whose message names the",
        "line, column and char of the error. An unknown algorithm's `422` suggests the",
        "closest names. A request answered with an error changes nothing. Clients should",
        "branch on `status` and `type`, never on `detail`.",
        "",
        "| status | `type` | title | raised as |",
        "|---|---|---|---|",
    ]
    rows = sorted(
        (status, suffix, title, cls.__name__)
        for cls, (status, suffix, title) in problems.PROBLEMS.items()
    )
    for status, suffix, title, name in rows:
        lines.append(f"| {status} | `{problems.TYPE_BASE}{suffix}` | {title} | `{name}` |")
    lines += [
        "",
        "`numerically-unstable` (422): the request's data would make the stream's state",
        "not finite (a value overflowed float64, e.g. 1e300 squared), so it is refused and",
        "nothing is applied; a WebSocket frame is refused the same way and uses up its seq.",
        "Input data itself must be finite (NaN or an infinity is `invalid-input`), and so",
        "must numeric parameters. A stream whose stored state is not finite (written by an",
        "earlier version) answers every write with this problem, naming the stream",
        "(`stream_id`); its selection, status and events can still be read, and deleting",
        "and re-creating it is the way on.",
        "",
        "Requests that never reach a route are answered the same way: a body that is not",
        "JSON is `400` `/problems/malformed-body`; an unknown path `404` `/problems/not-found`;",
        "a wrong method `405` `/problems/method-not-allowed`.",
        "",
        "The store's own limits: every store call is bounded by `store_timeout` (2 s by",
        "default), so a hung or unreachable Redis is a `503` `/problems/store-unavailable`",
        "within about that on every route (WebSockets: an `error`, then close 1013);",
        "Redis at `maxmemory` is a `503` `/problems/store-full`. Both carry `Retry-After`.",
        "A stream rolled back under the server (a failover, a restored backup) answers the",
        "next write of a producer whose updates were lost with `409`",
        "`/problems/sequence-conflict` and the true `expected_seq`: resend from there.",
        "`GET /events` with an `after` older than the log keeps (`event_retention`) is",
        "`410` `/problems/history-trimmed` with `oldest_version`; without `after` it starts",
        "at the oldest event kept.",
        "",
        "`request-too-expensive` (413): the selector's work on the request went beyond",
        "the server's time budget (`request_time_budget`, 30 s by default). Nothing of it",
        "was applied (no version, no event, the `seq` stays free) and the work stopped",
        "with the answer, which comes within about the budget. `completed` says how many",
        "of its items (`unit`: `columns` or `instances`) were done within the budget, of",
        "`total`; `budget_seconds` is the budget. Split the request: pieces of",
        "`completed` items (at least one) should fit. A WebSocket frame over the budget",
        "gets the same problem in its `error` and uses up its seq, like any refused",
        "frame. The Python client splits and resends by itself (each piece with its own",
        "`seq`, so nothing is applied twice).",
        "",
    ]


def _schemas(lines: list[str], schemas: dict[str, Any]) -> None:
    lines += ["## Schemas", ""]
    for name in sorted(schemas):
        if name in _HIDDEN_SCHEMAS:
            continue
        schema = schemas[name]
        lines += [f"### {name}", ""]
        if schema.get("description"):
            lines += [schema["description"].replace("``", "`").strip(), ""]
        props = schema.get("properties", {})
        if not props:
            lines += [f"Type: {type_of(schema)}.", ""]
            continue
        required = set(schema.get("required", []))
        lines += ["| field | type | required | default |", "|---|---|---|---|"]
        for field, sub in props.items():
            default = f"`{json.dumps(sub['default'])}`" if "default" in sub else "-"
            lines.append(
                f"| `{field}` | {_cell(type_of(sub))} | {'yes' if field in required else 'no'} | "
                f"{_cell(default)} |"
            )
        lines.append("")


def render_api() -> str:
    """The whole of docs/api.md."""
    spec = create_app(Settings()).openapi()
    lines = [
        "# HTTP API reference",
        "",
        "<!-- Generated by docs/generate.py from the OpenAPI schema; do not edit by hand. -->",
        "",
        f"featurestream {spec['info']['version']}. The same schema is served live at",
        "`GET /openapi.json`, with an interactive UI at `/docs`. Concepts (versions,",
        "producers and `seq`, the event log) are explained in [concepts.md](concepts.md).",
        "",
        "## Endpoints",
        "",
        "| method | path | summary |",
        "|---|---|---|",
    ]
    ops = [
        (path, method, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in _METHODS
    ]
    ops.sort(key=lambda t: (t[0], _METHODS.index(t[1])))
    for path, method, op in ops:
        summary = (op.get("description") or op.get("summary", "")).strip().split("\n")[0]
        summary = summary.replace("``", "`")
        lines.append(f"| {method.upper()} | `{path}` | {_cell(summary)} |")
    lines += ["", "## Operations", ""]
    for path, method, op in ops:
        _operation(lines, method, path, op)
    _websockets(lines)
    _array_bodies(lines)
    _writes(lines)
    _consuming(lines)
    _history(lines)
    _errors(lines)
    _schemas(lines, spec.get("components", {}).get("schemas", {}))
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- settings


def _serve_options() -> dict[str, str]:
    """Settings field -> ``featurestream serve`` option."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = sub.choices["serve"]
    out = {}
    for action in serve._actions:
        if action.option_strings and action.dest != "help":
            # The long form; a --flag/--no-flag pair shows as --[no-]flag.
            option = action.option_strings[-1]
            if isinstance(action, argparse.BooleanOptionalAction):
                option = action.option_strings[0].replace("--", "--[no-]", 1)
            out[_OPTION_FIELDS.get(action.dest, action.dest)] = option
    return out


def _constraint(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
        if getattr(meta, "min_length", None) is not None:
            parts.append(f"at least {meta.min_length} chars")
        if getattr(meta, "max_length", None) is not None:
            parts.append(f"at most {meta.max_length} chars")
        if getattr(meta, "pattern", None) is not None:
            parts.append(f"matching `{meta.pattern}`")
    return ", ".join(parts)


def render_settings_table() -> str:
    options = _serve_options()
    prefix = Settings.model_config.get("env_prefix", "")
    lines = [
        "| environment variable | `serve` option | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        meaning = field.description or _SETTING_NOTES.get(name)
        if not meaning:
            raise SystemExit(f"setting {name!r} has no description: add one in config.py")
        option = f"`{options[name]}`" if name in options else "-"
        lines.append(
            f"| `{prefix}{name.upper()}` | {option} | `{field.default}` | "
            f"{_cell(_constraint(field)) or '-'} | {_cell(meaning)} |"
        )
    return "\n".join(lines)


def render_operations(text: str) -> str:
    """operations.md with its settings table regenerated."""
    start, end = text.index(SETTINGS_START), text.index(SETTINGS_END)
    table = render_settings_table()
    return text[: start + len(SETTINGS_START)] + "\n" + table + "\n" + text[end:]


# --------------------------------------------------------------------------- main


def outputs() -> dict[Path, str]:
    return {
        API_MD: render_api(),
        OPERATIONS_MD: render_operations(OPERATIONS_MD.read_text()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is stale")
    args = parser.parse_args(argv)
    stale = [
        path for path, text in outputs().items() if not path.exists() or path.read_text() != text
    ]
    if args.check:
        for path in stale:
            print(f"{path.name} is stale: run python docs/generate.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["main", "outputs", "render_api", "render_operations", "render_settings_table"]
