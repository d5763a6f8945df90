"""Produce (key 0): the handler; the work is `produce/service.py`'s (`ProduceService`)."""

from __future__ import annotations

from typing import Protocol

from ..wire.dispatch import Dispatcher
from .services import HasProduce


class Services(HasProduce, Protocol):
    """What these handlers use of the broker."""


def register(dispatcher: Dispatcher, broker: Services) -> None:
    dispatcher.register(0, 3, 13, broker.produce.handle)
