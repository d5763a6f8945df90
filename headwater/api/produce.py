"""Produce (key 0): the handler; the work is `produce/service.py`'s (`ProduceService`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..wire.dispatch import Dispatcher

if TYPE_CHECKING:
    from ..broker import Broker


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    dispatcher.register(0, 3, 13, broker.produce.handle)
