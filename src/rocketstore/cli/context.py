"""Shared CLI state and output helpers."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import click

from rocketstore.format.message import MessageExt
from rocketstore.store import MessageStore


@dataclass
class CliContext:
    store_dir: str
    as_json: bool
    debug: bool

    def open_read_only(self) -> MessageStore:
        return MessageStore.open(self.store_dir, read_only=True)

    def emit(self, obj: dict[str, Any]) -> None:
        click.echo(json.dumps(obj, ensure_ascii=False, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def message_json(message: MessageExt) -> dict[str, Any]:
    return message.to_dict()
