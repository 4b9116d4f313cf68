"""The ACL on the gRPC port: plain_acl.yml's accounts and rules for RocketMQ 5.x clients.

Layer: broker.grpc. The verdict is the remoting side's (:func:`rocketstore.broker.acl.decide`:
white lists, account, signature, permissions, in RocketMQ's order); this module reads what
a gRPC call brings to it, as the 5.x proxy's ACL 1.0 path does
(``PlainAccessResource.parse(GeneratedMessageV3, AuthenticationHeader)``):

- the ``authorization`` header, ``MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time,
  Signature=HEX``: the account, and the HMAC-SHA1 of the ``x-mq-date-time`` header's value
  under the account's secret, in hex (the 5.x clients' ``Signature.sign``);
- which resources each request needs (:func:`call_resources`): a topic, or a group as its
  retry topic, with PUB, SUB or ANY.

A refusal is answered as RocketMQ 5.3.3's proxy answers an ``AuthenticationException`` or
``AuthorizationException`` (``ResponseBuilder.buildStatus``): the RPC's own response with
status ``UNAUTHORIZED`` and the ACL's message; a refused Telemetry command gets a
TelemetryCommand with that status, and the stream stays open.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from rocketstore.broker.acl import AclCheck, AclConfig, AclVerdict, decide
from rocketstore.broker.acl_permissions import ANY, PUB, SUB
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.remoting import ProtocolError
from rocketstore.paths import RETRY_PREFIX

__all__ = [
    "AUTHORIZATION_HEADER",
    "DATE_TIME_HEADER",
    "AclInterceptor",
    "authorize_call",
    "call_resources",
    "parse_authorization",
    "sign_date_time",
]

log = logging.getLogger(__name__)

# GrpcConstants.AUTHORIZATION / DATE_TIME
AUTHORIZATION_HEADER = "authorization"
DATE_TIME_HEADER = "x-mq-date-time"
ALGORITHM = "MQv2-HMAC-SHA1"


def sign_date_time(secret_key: str, date_time: str) -> str:
    """The signature a 5.x client sends: HMAC-SHA1 of the date-time header, in hex."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def parse_authorization(value: str) -> tuple[str, str]:
    """``(access_key, signature_hex)`` of an ``authorization`` header (RocketMQ's
    ``AuthorizationHeader``); ValueError when it is not one."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM or not rest:
        raise ValueError(f"authorization header is not {ALGORITHM}: {value[:64]!r}")
    fields: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, text = item.strip().partition("=")
        if not sep:
            raise ValueError(f"authorization header item without '=': {item.strip()[:64]!r}")
        fields[key.strip()] = text.strip()
    credential, signature = fields.get("Credential"), fields.get("Signature")
    if not credential or not signature:
        raise ValueError("authorization header without Credential or Signature")
    # Credential=AK[/more]: the access key is its first part (AuthorizationHeader).
    return credential.split("/")[0], signature


def _topic(resource: pb.Resource) -> str:
    # NamespaceUtil.wrapNamespace: NAMESPACE%NAME when the resource has a namespace
    if resource.resource_namespace:
        return f"{resource.resource_namespace}%{resource.name}"
    return resource.name


def _group(resource: pb.Resource) -> str:
    return RETRY_PREFIX + _topic(resource)


def _sub(needed: dict[str, int], group: pb.Resource, topic: pb.Resource | None) -> None:
    needed[_group(group)] = SUB
    if topic is not None:
        needed[_topic(topic)] = SUB


def call_resources(request: Message) -> dict[str, int]:
    """What a request needs: resource (a topic, or ``%RETRY%group``) -> permission, as
    ``PlainAccessResource.parse`` reads gRPC requests (5.2.0; RecallMessage as 5.3.3's
    authorization builder; PullMessage and the offset RPCs as the remoting PULL and
    offset requests need). Other requests need only an account. ProtocolError when the
    request cannot be read (the proxy's AclException)."""
    needed: dict[str, int] = {}
    if isinstance(request, spb.HeartbeatRequest):
        if request.client_type in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise ProtocolError("Consumer heartbeat doesn't have group")
            _sub(needed, request.group, None)
    elif isinstance(request, spb.SendMessageRequest):
        if not request.messages:
            raise ProtocolError("SendMessageRequest, messageCount is zero")
        topic = request.messages[0].topic
        if any(m.topic != topic for m in request.messages):
            raise ProtocolError("SendMessageRequest, messages' topic is not consistent")
        needed[_topic(topic)] = PUB
    elif isinstance(
        request,
        spb.ReceiveMessageRequest
        | spb.PullMessageRequest
        | spb.UpdateOffsetRequest
        | spb.GetOffsetRequest,
    ):
        _sub(needed, request.group, request.message_queue.topic)
    elif isinstance(request, spb.QueryOffsetRequest):
        needed[_topic(request.message_queue.topic)] = SUB
    elif isinstance(
        request,
        spb.AckMessageRequest
        | spb.ForwardMessageToDeadLetterQueueRequest
        | spb.ChangeInvisibleDurationRequest
        | spb.QueryAssignmentRequest,
    ):
        _sub(needed, request.group, request.topic)
    elif isinstance(request, spb.EndTransactionRequest | spb.RecallMessageRequest):
        needed[_topic(request.topic)] = PUB
    elif isinstance(request, spb.TelemetryCommand):
        if request.WhichOneof("command") == "settings":
            settings = request.settings
            for topic in settings.publishing.topics if settings.HasField("publishing") else ():
                needed[_topic(topic)] = PUB
            if settings.HasField("subscription"):
                _sub(needed, settings.subscription.group, None)
                for entry in settings.subscription.subscriptions:
                    needed[_topic(entry.topic)] = SUB
            if not settings.HasField("publishing") and not settings.HasField("subscription"):
                raise ProtocolError("settings command doesn't have publishing or subscription")
    elif isinstance(request, spb.NotifyClientTerminationRequest):
        if request.group.name.strip():
            _sub(needed, request.group, None)
    elif isinstance(request, spb.QueryRouteRequest):
        needed[_topic(request.topic)] = ANY
    return needed


def authorize_call(
    request: Message, metadata: Sequence[tuple[str, Any]], client_ip: str, acl: AclConfig
) -> AclVerdict:
    """May this gRPC request be served? The remoting verdict (:func:`decide`) on what
    the request needs, its account and its signature."""
    try:
        needed = call_resources(request)
    except ProtocolError as e:
        return AclVerdict(AclCheck.BAD_REQUEST, str(e))
    headers = {str(k).lower(): v for k, v in metadata}
    access_key, signature = None, ""
    authorization = headers.get(AUTHORIZATION_HEADER)
    if authorization:
        try:
            access_key, signature = parse_authorization(str(authorization))
        except ValueError as e:
            return AclVerdict(AclCheck.NO_SIGNATURE, str(e))
    date_time = str(headers.get(DATE_TIME_HEADER, ""))

    def signed(secret: str) -> AclCheck:
        if not signature or not date_time:
            return AclCheck.NO_SIGNATURE
        expected = sign_date_time(secret, date_time)
        # compare_digest: the time taken does not tell how much of a guess was right
        return (
            AclCheck.OK
            if hmac.compare_digest(expected.encode(), signature.lower().encode())
            else AclCheck.BAD_SIGNATURE
        )

    return decide(needed, client_ip, acl, access_key, signed)


def _refusal(verdict: AclVerdict) -> pb.Status:
    return pb.Status(code=pb.Code.UNAUTHORIZED, message=verdict.message or verdict.check.value)


class AclInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # (grpcio: untyped)
    """Checks every call of MessagingService against ``acl()`` (None: the ACL is off).

    ``peer_of``: a call's ``ip:port`` -> the client's (the permissive TLS front relays
    connections: white lists must see the client, not the relay)."""

    def __init__(
        self, acl: Callable[[], AclConfig | None], peer_of: Callable[[str], str] = str
    ) -> None:
        self.acl = acl
        self.peer_of = peer_of

    def _verdict(self, request: Message, context: Any) -> AclVerdict | None:
        """None: served; else the refusal."""
        acl = self.acl()
        if acl is None:
            return None
        kind, _, address = str(context.peer()).partition(":")
        client = self.peer_of(address) if kind in ("ipv4", "ipv6") else address
        host = client.rpartition(":")[0].strip("[]") or client
        verdict = authorize_call(request, context.invocation_metadata() or (), host, acl)
        if verdict.ok:
            return None
        log.info("gRPC ACL refused %s from %s: %s", type(request).__name__, host, verdict.message)
        return verdict

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = str(handler_call_details.method).rpartition("/")[2]
        answer = getattr(spb, f"{method}Response", None)
        if answer is not None and "status" not in answer.DESCRIPTOR.fields_by_name:
            answer = None  # (no status to answer with: the call is aborted instead)
        if handler.unary_unary is not None:
            return self._unary(handler, answer)
        if handler.unary_stream is not None:
            return self._server_stream(handler, answer)
        if handler.stream_stream is not None and method == "Telemetry":
            return self._telemetry(handler)
        return handler  # (MessagingService has no other kind of call)

    def _unary(self, handler: grpc.RpcMethodHandler, answer: Any | None) -> grpc.RpcMethodHandler:
        inner = handler.unary_unary

        async def call(request: Message, context: Any) -> Any:
            refused = self._verdict(request, context)
            if refused is not None:
                if answer is not None:
                    return answer(status=_refusal(refused))
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, refused.message)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            call, handler.request_deserializer, handler.response_serializer
        )

    def _server_stream(
        self, handler: grpc.RpcMethodHandler, answer: Any | None
    ) -> grpc.RpcMethodHandler:
        inner = handler.unary_stream

        async def call(request: Message, context: Any) -> AsyncIterator[Any]:
            refused = self._verdict(request, context)
            if refused is not None:
                if answer is not None:
                    yield answer(status=_refusal(refused))
                    return
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, refused.message)
            async for item in inner(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            call, handler.request_deserializer, handler.response_serializer
        )

    def _telemetry(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """Each command is checked (the proxy runs its pipeline per command); a refused
        one is answered with a status and not passed on."""
        inner = handler.stream_stream

        async def call(requests: AsyncIterator[Message], context: Any) -> AsyncIterator[Any]:
            out: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue()

            async def checked() -> AsyncIterator[Message]:
                async for command in requests:
                    refused = self._verdict(command, context)
                    if refused is None:
                        yield command
                    else:
                        out.put_nowait((False, spb.TelemetryCommand(status=_refusal(refused))))

            async def pump() -> None:
                try:
                    async for item in inner(checked(), context):
                        out.put_nowait((False, item))
                except Exception as e:  # handed to the call, which raises it
                    out.put_nowait((True, e))
                    return
                out.put_nowait((True, None))

            task = asyncio.ensure_future(pump())
            try:
                while True:
                    done, item = await out.get()
                    if done:
                        if item is not None:
                            raise item
                        return
                    yield item
            finally:
                task.cancel()

        return grpc.stream_stream_rpc_method_handler(
            call, handler.request_deserializer, handler.response_serializer
        )
