"""Plain JSON out of what pygls hands a handler: command arguments and its stand-ins for unknown objects."""

from __future__ import annotations

from typing import Any

__all__ = ["arg", "plain", "uri_of"]


def plain(value: Any) -> Any:
    """Namedtuple-ish objects (pygls' stand-in for unknown JSON objects) back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def arg(args: tuple[Any, ...], index: int = 0) -> Any:
    """A command's argument at ``index``, or None."""
    return args[index] if len(args) > index else None


def uri_of(value: Any) -> str | None:
    """The document a command argument names: a URI, ``{uri}`` or ``{textDocument: {uri}}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        uri = value.get("uri") or (value.get("textDocument") or {}).get("uri")
        return uri if isinstance(uri, str) else None
    return None
