"""The store's Lua scripts: the ``*.lua`` files beside this module, each opening with
its KEYS and ARGV, registered once per client (redis-py sends EVALSHA, and the
script itself when a node does not know it)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any


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
