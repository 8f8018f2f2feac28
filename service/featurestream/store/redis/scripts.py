"""The store's Lua scripts: the ``*.lua`` files beside this module, each opening with
its KEYS and ARGV, registered once per client (redis-py sends EVALSHA, and the
script itself when a node does not know it)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

from featurestream.store.base import Commit


@cache
def source(name: str) -> str:
    """The text of the script ``name`` (``<name>.lua``)."""
    return files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


class Scripts:
    """Every script of the store, registered on one client."""

    def __init__(self, client: Any) -> None:
        self.reserve = client.register_script(source("reserve"))
        self.drop_stale = client.register_script(source("drop_stale"))
        self.unreserve = client.register_script(source("unreserve"))
        self.create = client.register_script(source("create"))
        self.commit = client.register_script(source("commit"))
        self.names_since = client.register_script(source("names_since"))


def commit_args(
    commit: Commit, channel: str, limits: tuple[int, int, int], known: tuple[int, str]
) -> list[Any]:
    """The ARGV of ``commit.lua`` for ``commit``: ``limits`` are the replay window, the
    event retention and the replay bytes; ``known`` where the names log ended when the
    names were looked up (entries, id of the last)."""
    window, retention, replay_bytes = limits
    pairs = commit.seq_responses()
    args: list[Any] = [
        commit.commit_id,
        commit.incarnation,
        commit.expected_version,
        commit.expected_commit,
        commit.blob if commit.state_changed else b"",
        commit.updated_at,
        commit.selection,
        commit.status,
        commit.events,
        commit.producer or "",
        len(pairs),
        window,
        channel,
        commit.notify,
        1 if commit.state_changed else 0,
        retention,
        replay_bytes,
    ]
    for seq, response in pairs:
        args += [seq, response]
    args.append("\n".join(commit.names) if commit.state_changed else "")
    args += [known[0], known[1]]
    args += ["" if commit.seen_ms is None else commit.seen_ms, len(commit.drop_producers)]
    args += list(commit.drop_producers)
    return args
