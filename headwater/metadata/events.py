"""How services follow the metadata image without holding the controller.

`ImageSource` returns the current image (immutable; a new one after every change) and
`MetadataEvents` tells subscribers of each change, old and new image, in subscription
order. The controller provides both; a test passes a lambda and a list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .image import MetadataImage

ImageSource = Callable[[], MetadataImage]
"""The current metadata image."""

Listener = Callable[[MetadataImage, MetadataImage], None]
"""Called with (old, new) image after a change."""


class MetadataEvents(Protocol):
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(old, new)` after every change; returns the unsubscribe handle."""
        ...
