"""Planning-time check of TLS trust and SASL credentials.

librdkafka reports a refused password or an untrusted broker certificate only through
error callbacks, and its calls then end minutes later with a bare "transport failure".
One connection of headwater's own client to the first bootstrap server, authenticated
as the query's clients would be, turns that into an immediate error naming the option.
A broker that cannot be reached is not an error here: the clients' retries cover that.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import Any

from headwater.wire.client_properties import understood
from headwater.wire.client_security import PLAINTEXT, AuthenticationError, ClientSecurity

from .options import HeadwaterOptionError

log = logging.getLogger("pyspark_headwater")
TIMEOUT_S = 5.0


def check_credentials(conf: Mapping[str, Any]) -> None:
    """Raise HeadwaterOptionError when the broker refuses the credentials in ``conf``
    (librdkafka names, ``bootstrap.servers`` included) or its certificate is untrusted."""
    if not understood(conf):  # librdkafka-only settings: nothing to check with
        return
    security = ClientSecurity.from_config(
        {k: v for k, v in conf.items() if k != "bootstrap.servers"})
    if security == PLAINTEXT:
        return
    first = str(conf.get("bootstrap.servers", "")).split(",")[0].strip()
    host, _, port = first.rpartition(":")
    host = host.strip("[]") or "localhost"
    try:
        security.connect(host, int(port or 9092), TIMEOUT_S).close()
    except AuthenticationError as exc:
        raise HeadwaterOptionError(
            f"The broker at {host}:{port} refused SASL {security.mechanism} authentication "
            f"of user '{security.username}': {exc} (options 'kafka.sasl.jaas.config' / "
            "'kafka.sasl.mechanism')") from None
    except ssl.SSLCertVerificationError as exc:
        raise HeadwaterOptionError(
            f"The certificate of the broker at {host}:{port} is not trusted: "
            f"{exc.verify_message} (options 'kafka.ssl.truststore.location', "
            "'kafka.ssl.endpoint.identification.algorithm')") from None
    except (OSError, ValueError) as exc:
        log.info("credentials not checked at planning: %s:%s unreachable (%s)", host, port,
                 exc)
