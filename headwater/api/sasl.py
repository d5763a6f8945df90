"""SaslHandshake (17), SaslAuthenticate (36) on SASL listeners, and SCRAM credentials:
DescribeUserScramCredentials (50), AlterUserScramCredentials (51), as Kafka's broker
(`kafka-configs --entity-type users --add-config 'SCRAM-SHA-256=[password=...]'`)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata import records as R
from ..security import acl as A
from ..security.sasl import SaslFailure, SaslIllegalState, SaslSession
from ..security.scram import BY_ID, MAX_ITERATIONS, MIN_ITERATIONS, credential
from ..wire.dispatch import (
    CLOSE_AFTER_RESPONSE,
    PRINCIPAL,
    SASL_SESSION,
    Dispatcher,
    RequestContext,
)
from .services import HasAccess, HasController, HasImage

log = logging.getLogger("headwater.security")

SESSION = SASL_SESSION


class Services(HasAccess, HasImage, HasController, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handshake(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        session: SaslSession | None = ctx.attrs.get(SESSION)
        if session is None:
            return {"error_code": E.illegal_sasl_state, "mechanisms": []}
        code = session.handshake(req.mechanism)
        # Kafka lists its mechanisms, except to a handshake out of place (KafkaApis')
        return {"error_code": code,
                "mechanisms": [] if code == E.illegal_sasl_state else session.config.mechanisms}

    def authenticate(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        session: SaslSession | None = ctx.attrs.get(SESSION)
        base = {"auth_bytes": b"", "session_lifetime": 0}
        if session is None:
            return {**base, "error_code": E.illegal_sasl_state,
                    "error_message": "SaslAuthenticate on a listener without SASL"}
        try:
            reply = session.authenticate(req.auth_bytes)
        except SaslIllegalState as exc:  # KafkaApis' answer; the connection stays
            return {**base, "error_code": E.illegal_sasl_state, "error_message": str(exc)}
        except SaslFailure as exc:
            log.warning("SASL authentication failed from %s (%s): %s", ctx.client_host,
                        session.mechanism, exc)
            ctx.attrs[CLOSE_AFTER_RESPONSE] = True  # Kafka closes it after the answer
            return {**base, "error_code": E.sasl_authentication_failed,
                    "error_message": str(exc)}
        if session.authenticated:
            again = ctx.attrs.get(PRINCIPAL) == session.principal
            ctx.attrs[PRINCIPAL] = session.principal
            log.info("%s %s as %s (%s)", "re-authenticated" if again else "authenticated",
                     ctx.client_host, session.principal, session.mechanism)
        # Kafka answers a success with an empty message, not a null one
        return {**base, "error_code": 0, "error_message": "", "auth_bytes": reply,
                "session_lifetime": session.session_lifetime_ms}

    def describe(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "error_message": None, "results": []}
        scram = self.broker.image.scram
        # null or empty: every user (kafka-configs --describe --entity-type users)
        users = sorted({u for u, _m in scram}) if not req.users else [
            u.name for u in req.users]
        counts = Counter(users)
        results: list[dict[str, Any]] = []
        for user in dict.fromkeys(users):
            infos = [{"mechanism": m, "iterations": rec.iterations}
                     for (u, m), rec in sorted(scram.items()) if u == user]
            if counts[user] > 1:
                results.append({"user": user, "error_code": E.duplicate_resource,
                                "error_message": f"Cannot describe SCRAM credentials for the "
                                f"same user twice in a single request: {user}",
                                "credential_infos": []})
            elif not infos:
                results.append({"user": user, "error_code": E.resource_not_found,
                                "error_message": "Attempt to describe a user credential "
                                "that does not exist", "credential_infos": []})
            else:
                results.append({"user": user, "error_code": 0, "error_message": None,
                                "credential_infos": infos})
        return {"throttle_time": 0, "error_code": 0, "error_message": None,
                "results": results}

    def alter(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        scram = self.broker.image.scram
        names = Counter([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        if self.broker.access.denies(ctx, A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "results": [
                {"user": user, "error_code": E.cluster_authorization_failed,
                 "error_message": None} for user in names]}
        records: list[object] = []
        errors: dict[str, tuple[int, str | None]] = {}

        def refused(name: str, mechanism: int) -> tuple[int, str] | None:
            """The checks deletions and upsertions share."""
            if names[name] > 1:
                return E.duplicate_resource, ("A user credential cannot be altered twice in "
                                              "the same request")
            if not name:
                return E.unacceptable_credential, "Username must not be empty"
            if mechanism not in BY_ID:
                return E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
            return None

        def fail(user: str, code: int, message: str) -> None:
            errors.setdefault(user, (code, message))
        for d in req.deletions:
            if (why := refused(d.name, d.mechanism)) is not None:
                fail(d.name, *why)
            elif (d.name, d.mechanism) not in scram:
                fail(d.name, E.resource_not_found, "Attempt to delete a user credential that "
                     "does not exist")
            else:
                records.append(R.RemoveUserScramCredentialRecord(d.name, d.mechanism))
        for u in req.upsertions:
            if (why := refused(u.name, u.mechanism)) is not None:
                fail(u.name, *why)
            elif u.iterations < MIN_ITERATIONS:
                fail(u.name, E.unacceptable_credential, "Too few iterations")
            elif u.iterations > MAX_ITERATIONS:
                fail(u.name, E.unacceptable_credential, "Too many iterations")
            else:
                cred = credential(BY_ID[u.mechanism], u.salted_password, u.salt,
                                  u.iterations)
                records.append(R.UserScramCredentialRecord(
                    u.name, u.mechanism, cred.salt, cred.stored_key, cred.server_key,
                    cred.iterations))
        records = [r for r in records if r.name not in errors]  # type: ignore[attr-defined]
        self.broker.controller.commit(records)
        return {"throttle_time": 0, "results": [
            {"user": user, "error_code": errors.get(user, (0, None))[0],
             "error_message": errors.get(user, (0, None))[1]} for user in names]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(17, 1, 1, handlers.handshake)
    dispatcher.register(36, 0, 2, handlers.authenticate)
    dispatcher.register(50, 0, 0, handlers.describe)
    dispatcher.register(51, 0, 0, handlers.alter)
