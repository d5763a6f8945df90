"""What can go wrong when a broker asks another broker (a forwarded metadata change, a
coordinator's or a leader's request): the layers above tell the two apart, since Kafka
answers a timed-out forward with REQUEST_TIMED_OUT and a refused envelope with
UNKNOWN_SERVER_ERROR."""

from __future__ import annotations


class ForwardError(RuntimeError):
    """Another broker could not be reached, or did not answer in time."""


class EnvelopeRefused(ForwardError):
    """The controller answered the envelope itself with an error (`code`)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class PeerAuthenticationError(ForwardError):
    """Another broker refused this broker's inter-broker credentials: retrying does not
    cure it; the message names the setting that holds them."""
