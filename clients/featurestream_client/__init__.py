"""featurestream_client: the Python client of a featurestream server.

Speaks only the HTTP/WebSocket contract; never imports the server package.
``Client`` and ``AsyncClient`` create streams and send columns, groups and
instances; ``FeatureStreamSelector`` (needs scikit-learn) is a scikit-learn
selector backed by a server stream. The guide is docs/client.md.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import TYPE_CHECKING, Any

from featurestream_client._history import Change, Evaluation, History, Stability
from featurestream_client.aio import AsyncClient, AsyncStream
from featurestream_client.client import Client, Stream
from featurestream_client.errors import (
    ConcurrentUpdate,
    ConnectionFailed,
    EvaluationUnavailable,
    FeatureStreamError,
    HistoryTrimmed,
    InvalidInput,
    InvalidParameter,
    MalformedBody,
    NotFound,
    PayloadTooLarge,
    RequestTooExpensive,
    SeqReused,
    SequenceConflict,
    ServerError,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
    Unauthorized,
    UnsupportedMediaType,
    VersionNotFound,
    WebSocketClosed,
    WrongStreamKind,
)
from featurestream_client.models import (
    Algorithm,
    Decision,
    Event,
    EventPage,
    FeaturesResult,
    InstancesResult,
    SelectedFeature,
    Selection,
    StreamInfo,
)
from featurestream_client.retry import RetryPolicy
from featurestream_client.ws import WebSocketUnavailable

if TYPE_CHECKING:
    from featurestream_client.sklearn import FeatureStreamInstanceSelector, FeatureStreamSelector


def _installed_version() -> str:
    # The client ships alone (featurestream-client) and inside the server's
    # distribution (featurestream); either way the installed metadata knows its version.
    for distribution in ("featurestream-client", "featurestream"):
        try:
            return _distribution_version(distribution)
        except PackageNotFoundError:
            continue
    return "0+unknown"


__version__ = _installed_version()


def __getattr__(name: str) -> Any:
    # scikit-learn is optional: import the adapter only when it is asked for.
    if name in ("FeatureStreamSelector", "FeatureStreamInstanceSelector"):
        from featurestream_client import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'featurestream_client' has no attribute {name!r}")


__all__ = [
    "Algorithm",
    "AsyncClient",
    "AsyncStream",
    "Change",
    "Client",
    "ConcurrentUpdate",
    "ConnectionFailed",
    "Decision",
    "Evaluation",
    "EvaluationUnavailable",
    "Event",
    "EventPage",
    "FeatureStreamError",
    "FeatureStreamInstanceSelector",
    "FeatureStreamSelector",
    "FeaturesResult",
    "History",
    "HistoryTrimmed",
    "InstancesResult",
    "InvalidInput",
    "InvalidParameter",
    "MalformedBody",
    "NotFound",
    "PayloadTooLarge",
    "RequestTooExpensive",
    "RetryPolicy",
    "SelectedFeature",
    "Selection",
    "SeqReused",
    "SequenceConflict",
    "ServerError",
    "Stability",
    "StoreUnavailable",
    "Stream",
    "StreamExists",
    "StreamInfo",
    "StreamNotFound",
    "Unauthorized",
    "UnsupportedMediaType",
    "VersionNotFound",
    "WebSocketClosed",
    "WebSocketUnavailable",
    "WrongStreamKind",
    "__version__",
]
