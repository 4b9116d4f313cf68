"""The Spark source's client of a running RocketMQ cluster: name server lookups on the
driver, queue bounds, pulls and key queries against brokers (blocking, no pyspark).

Layer: spark (top). Speaks the remoting protocol through :mod:`rocketstore.remoting`; never
imports rocketstore.broker (the layers contract keeps spark beside it). Each request names
its server in the error it raises: :class:`~rocketstore.remoting.blocking.RemotingClientError`
when a server cannot be reached or does not answer, :class:`ClusterError` when it refuses
(:class:`AccessDeniedError` when its ACL does: options accessKey / secretKey).

Options ``accessKey`` / ``secretKey`` sign every request (:mod:`rocketstore.remoting.acl_signing`,
the broker's own checker's signing); option ``brokerDownWaitMs`` makes a broker request that
gets no answer wait for the broker, with backoff (:class:`Backoff`), before it fails.

The requests are a Java consumer's (DefaultLitePullConsumer's) with nothing committed and
nothing held: PULL_MESSAGE with sysFlag = FLAG_SUBSCRIPTION only (the subscription "*" in
the request, so no heartbeat is needed; no commit offset, no suspend).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rocketstore.errors import ConfigError, StoreError
from rocketstore.remoting.acl_signing import SessionCredentials, sign_request
from rocketstore.remoting.blocking import BlockingConnection, RemotingClientError, request
from rocketstore.remoting.codec import RemotingCommand
from rocketstore.remoting.codes import RequestCode, ResponseCode

log = logging.getLogger(__name__)

MASTER_ID = 0
# PullSysFlag: the request carries its subscription (bit 2); no commit (bit 0), no suspend
# (bit 1).
PULL_FLAG_SUBSCRIPTION = 0x4
# The consumer group the pulls name: brokers auto-create it (autoCreateSubscriptionGroup,
# on by default); nothing is ever committed for it.
READER_GROUP = "rocketstore_spark_reader"
# Messages asked for per pull: a broker gives at most its maxTransferCountOnMessageInMemory
# (32) / ...InDisk (8) and 256 KiB / 64 KiB per answer anyway; asking more costs nothing.
PULL_BATCH = 1024
# A broker answers a QUERY_MESSAGE with at most maxMsgsNumBatch (64) records of one key.
QUERY_MAX_NUM = 64
JAVA_LONG_MAX = (1 << 63) - 1
# The clientID of option group's heartbeat (a Java client's is ip@instance).
CLIENT_ID = f"{socket.gethostname()}@rocketstore_spark@{os.getpid()}"
# PermName: the read and write bits of a queue data's perm.
PERM_READ = 0x4
PERM_WRITE = 0x2
# fastjson writes a map's non-string keys unquoted: a Java name server's brokerAddrs is
# {0:"10.0.0.1:10911"}. Such a key follows "{" or ",".
_UNQUOTED_KEY = re.compile(r'([{,])\s*(-?\d+)\s*:(?=\s*["{\[\dntf-])')


# Waiting for a broker that does not answer (option brokerDownWaitMs): the first retry
# after this long, each next one after twice the last, at most BACKOFF_MAX_MS apart.
BACKOFF_FIRST_MS = 100
BACKOFF_MAX_MS = 2000


class ClusterError(StoreError):
    """A name server or broker refused a request the read needs (named in the message)."""


class AccessDeniedError(ClusterError):
    """A broker's ACL refused a request (NO_PERMISSION, or a Java broker's AclException):
    options accessKey / secretKey are missing or wrong, or the account lacks the topic's
    or group's permission. Never waited on or retried: the same keys get the same answer."""


# A Java 4.9.8 broker's ACL throws AclException in its RPC hook, which the remoting layer
# answers SYSTEM_ERROR with the exception's description (NettyRemotingAbstract
# .processRequestCommand): "org.apache.rocketmq.acl.common.AclException: Check signature
# failed for accessKey=...", "... No acl config for ...", "... has no permission ...".
JAVA_ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


def is_acl_refusal(answer: RemotingCommand) -> bool:
    """An ACL's refusal: rocketstore's broker answers NO_PERMISSION, a Java 4.9.8 broker
    SYSTEM_ERROR naming AclException."""
    if answer.code == ResponseCode.NO_PERMISSION:
        return True
    return answer.code == ResponseCode.SYSTEM_ERROR and JAVA_ACL_EXCEPTION in (answer.remark or "")


def refusal(what: str, where: str, answer: RemotingCommand, signed: bool) -> ClusterError:
    """The error for a request ``answer`` refused: an :class:`AccessDeniedError` saying
    what to check when it is an ACL's refusal (:func:`is_acl_refusal`), else a
    ClusterError with the code."""
    if is_acl_refusal(answer):
        hint = (
            "check options accessKey and secretKey (an account of the broker's ACL file, "
            "and its permissions for the topic and group)"
            if signed
            else "the broker checks an ACL: give options accessKey and secretKey"
        )
        name = "NO_PERMISSION" if answer.code == ResponseCode.NO_PERMISSION else "SYSTEM_ERROR"
        return AccessDeniedError(
            f"{what}: refused by the ACL of {where} (code {answer.code} {name}, "
            f"{answer.remark}): {hint}"
        )
    return ClusterError(f"{what}: refused by {where}: code {answer.code}, {answer.remark}")


class Backoff:
    """Bounded waiting with exponential backoff (option brokerDownWaitMs): after each
    failure :meth:`again` sleeps and says whether to try once more, until ``wait_ms``
    have passed since the first failure."""

    def __init__(
        self,
        wait_ms: int,
        clock_s: Callable[[], float] = time.monotonic,
        sleep_s: Callable[[float], None] = time.sleep,
    ) -> None:
        self.wait_ms = wait_ms
        self._clock_s = clock_s
        self._sleep_s = sleep_s
        self._deadline_s: float | None = None
        self._delay_ms = BACKOFF_FIRST_MS
        self.retries = 0

    def again(self) -> bool:
        now = self._clock_s()
        if self._deadline_s is None:
            self._deadline_s = now + self.wait_ms / 1000
        left_s = self._deadline_s - now
        if left_s <= 0:
            return False
        self._sleep_s(min(self._delay_ms / 1000, left_s))
        self._delay_ms = min(2 * self._delay_ms, BACKOFF_MAX_MS)
        self.retries += 1
        return True


def loads_fastjson(data: bytes, what: str) -> Any:
    """A JSON body as fastjson writes it (integer map keys unquoted)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ClusterError(f"{what}: the answer is not UTF-8: {e}") from e
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_UNQUOTED_KEY.sub(r'\1"\2":', text))
    except (ValueError, RecursionError) as e:
        raise ClusterError(f"{what}: the answer is not JSON: {e}") from e


def split_addresses(namesrv: str) -> list[str]:
    return [a.strip() for a in namesrv.split(";") if a.strip()]


@dataclass(frozen=True)
class BrokerRoute:
    """One broker (master and slaves) serving a topic: its readable queues."""

    name: str
    addresses: tuple[tuple[int, str], ...]  # (broker id, address), master (0) first
    read_queue_nums: int
    perm: int
    write_queue_nums: int = 0

    @property
    def writable(self) -> bool:
        """Whether a producer sends here: write permission, write queues and a master."""
        return bool(self.perm & PERM_WRITE) and self.write_queue_nums > 0 and bool(self.master)

    @property
    def master(self) -> str | None:
        return dict(self.addresses).get(MASTER_ID)

    @property
    def preferred(self) -> str:
        """Where requests go first: the master, or the first slave while it is down."""
        return self.master or self.addresses[0][1]

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


def parse_route(topic: str, route: Any) -> list[BrokerRoute]:
    """TopicRouteData -> the brokers that hold the topic's queues, by name."""
    if not isinstance(route, dict):
        raise ClusterError(f"route of {topic!r}: not a JSON object")
    addresses: dict[str, tuple[tuple[int, str], ...]] = {}
    for data in route.get("brokerDatas") or []:
        addrs = data.get("brokerAddrs") or {}
        addresses[str(data.get("brokerName"))] = tuple(
            sorted((int(i), str(a)) for i, a in addrs.items())
        )
    brokers = []
    for queue_data in route.get("queueDatas") or []:
        name = str(queue_data.get("brokerName"))
        brokers.append(
            BrokerRoute(
                name=name,
                addresses=addresses.get(name, ()),
                read_queue_nums=int(queue_data.get("readQueueNums", 0)),
                perm=int(queue_data.get("perm", 6)),
                write_queue_nums=int(queue_data.get("writeQueueNums", 0)),
            )
        )
    return sorted(brokers, key=lambda b: b.name)


PullRequest = tuple[str, int, int, int]  # topic, queue id, queue offset, max messages


@dataclass(frozen=True)
class PullResult:
    """A PULL_MESSAGE answer: the response code, where the next pull starts, the queue's
    bounds, the broker id to pull from next, and the records (CommitLog format)."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_broker_id: int
    body: bytes
    remark: str | None


class Cluster:
    """Requests to the name servers of ``namesrv`` and to the brokers, over kept
    connections (one per address; not thread-safe: one per task).

    With ``credentials`` every request is signed (AccessKey, Signature), name server
    requests too, as a Java client with an ``AclClientRPCHook`` signs them. With
    ``broker_down_wait_ms`` a broker request that gets no answer (refused, closed, timed
    out) is sent again with backoff for that long before its error is raised; every
    request the network mode sends a broker is idempotent (reads, offset commits), and
    writes use no wait (a producer goes to the next broker instead)."""

    def __init__(
        self,
        namesrv: str = "",
        timeout_s: float = 10.0,
        *,
        credentials: SessionCredentials | None = None,
        broker_down_wait_ms: int = 0,
        clock_s: Callable[[], float] = time.monotonic,
        sleep_s: Callable[[float], None] = time.sleep,
    ) -> None:
        self.namesrv = split_addresses(namesrv)
        self.timeout_s = timeout_s
        self.credentials = credentials
        self.broker_down_wait_ms = broker_down_wait_ms
        self._clock_s = clock_s
        self._sleep_s = sleep_s
        self._connections: dict[str, BlockingConnection] = {}
        self._names: dict[str, str] = {}  # address -> brokerName, from the routes asked

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def signed(self) -> bool:
        return self.credentials is not None

    def know(self, name: str, addresses: Iterable[tuple[int, str]]) -> None:
        """Remember that ``addresses`` are broker ``name``'s (for error messages)."""
        for _, address in addresses:
            self._names[address] = name

    def describe(self, address: str) -> str:
        """``broker broker-a (10.0.0.1:10911)``, or ``broker 10.0.0.1:10911`` when its
        name is not known here."""
        name = self._names.get(address)
        return f"broker {name} ({address})" if name else f"broker {address}"

    def invoke(self, address: str, cmd: RemotingCommand, *, wait: bool = True) -> RemotingCommand:
        """``cmd`` (signed with the credentials) to ``address``; a broker that does not
        answer is waited for as ``broker_down_wait_ms`` says (not when ``wait`` is
        False: the name servers, tried in turn instead)."""
        if self.credentials is not None:
            cmd = sign_request(cmd, self.credentials)
        if not wait or self.broker_down_wait_ms <= 0:
            return self._invoke_once(address, cmd)
        backoff = Backoff(self.broker_down_wait_ms, self._clock_s, self._sleep_s)
        while True:
            try:
                return self._invoke_once(address, cmd)
            except RemotingClientError as e:
                if backoff.retries == 0:
                    log.warning(
                        "%s did not answer (%s): trying again for up to %d ms "
                        "(option brokerDownWaitMs)",
                        self.describe(address), e, self.broker_down_wait_ms,
                    )  # fmt: skip
                if not backoff.again():
                    raise RemotingClientError(
                        f"{self.describe(address)} did not come back within "
                        f"brokerDownWaitMs={self.broker_down_wait_ms} "
                        f"({backoff.retries} retries): {e}"
                    ) from e

    def _invoke_once(self, address: str, cmd: RemotingCommand) -> RemotingCommand:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = BlockingConnection(address, self.timeout_s)
        return connection.invoke(cmd)

    def _namesrv_call(self, code: int, ext: dict[str, str], what: str) -> RemotingCommand:
        """The first name server that answers (in the given order, as a Java client tries
        them); RemotingClientError naming every address when none does."""
        failures = []
        for address in self.namesrv:
            try:
                return self.invoke(address, request(code, ext), wait=False)
            except RemotingClientError as e:
                failures.append(str(e))
        raise RemotingClientError(
            f"{what}: no name server of {';'.join(self.namesrv)} answered ({'; '.join(failures)})"
        )

    # --- name server --------------------------------------------------------------------

    def topic_list(self) -> list[str]:
        answer = self._namesrv_call(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, "topic list"
        )
        if answer.code != ResponseCode.SUCCESS:
            raise ClusterError(
                f"topic list from {self.namesrv}: code {answer.code}, {answer.remark}"
            )
        body = loads_fastjson(answer.body, "topic list")
        return sorted(str(t) for t in body.get("topicList", []))

    def route(self, topic: str) -> list[BrokerRoute]:
        """The brokers of ``topic``; ConfigError naming the topic and the name servers
        when no broker serves it."""
        answer = self._namesrv_call(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, f"route of topic {topic!r}"
        )
        if answer.code == ResponseCode.TOPIC_NOT_EXIST:
            raise ConfigError(
                f"topic {topic!r} is unknown to the name servers {';'.join(self.namesrv)} "
                "(no broker serves it)"
            )
        if answer.code != ResponseCode.SUCCESS:
            raise ClusterError(
                f"route of topic {topic!r} from {';'.join(self.namesrv)}: code {answer.code}, "
                f"{answer.remark}"
            )
        brokers = parse_route(topic, loads_fastjson(answer.body, f"route of topic {topic!r}"))
        for broker in brokers:
            self.know(broker.name, broker.addresses)
        return brokers

    # --- broker: queue bounds -----------------------------------------------------------

    def _offset(self, address: str, code: int, ext: dict[str, str], what: str) -> int:
        answer = self.invoke(address, request(code, ext))
        if answer.code != ResponseCode.SUCCESS:
            raise refusal(what, self.describe(address), answer, self.signed)
        try:
            return int(answer.ext_fields["offset"])
        except (KeyError, ValueError) as e:
            raise ClusterError(
                f"{what} from {self.describe(address)}: no offset in the answer"
            ) from e

    def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        ext = {"topic": topic, "queueId": str(queue_id)}
        what = f"min offset of {topic} queue {queue_id}"
        return self._offset(address, RequestCode.GET_MIN_OFFSET, ext, what)

    def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        ext = {"topic": topic, "queueId": str(queue_id)}
        what = f"max offset of {topic} queue {queue_id}"
        return self._offset(address, RequestCode.GET_MAX_OFFSET, ext, what)

    def offset_by_time(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (BoundaryType.LOWER,
        what a 4.9 broker always gives)."""
        ext = {
            "topic": topic,
            "queueId": str(queue_id),
            "timestamp": str(timestamp_ms),
            "boundaryType": "LOWER",
        }
        what = f"offset of {topic} queue {queue_id} at {timestamp_ms}"
        return self._offset(address, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext, what)

    def commit_offset(
        self, address: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        """UPDATE_CONSUMER_OFFSET: ``group``'s next offset to consume in the queue (what
        ``mqadmin consumerProgress`` shows against the max offset)."""
        ext = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "commitOffset": str(offset),
        }
        answer = self.invoke(address, request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
        if answer.code != ResponseCode.SUCCESS:
            what = f"commit of {group}'s offset {offset} in {topic} queue {queue_id}"
            raise refusal(what, self.describe(address), answer, self.signed)

    def register_group(self, address: str, group: str) -> None:
        """HEART_BEAT naming ``group`` as a consumer, as a Java DefaultLitePullConsumer in
        assign mode sends it (CONSUME_ACTIVELY, no subscriptions). A broker creates the
        group's subscription group and its ``%RETRY%`` topic on a heartbeat only
        (ClientManageProcessor.heartBeat); without that topic ``mqadmin consumerProgress
        -g`` fails on a Java broker ("No topic route info ... %RETRY%group")."""
        consumer = {
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_ACTIVELY",
            "groupName": group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": [],
            "unitMode": False,
        }
        body = {"clientID": CLIENT_ID, "consumerDataSet": [consumer], "producerDataSet": []}
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        answer = self.invoke(address, request(RequestCode.HEART_BEAT, {}, data))
        if answer.code != ResponseCode.SUCCESS:
            what = f"heartbeat of consumer group {group}"
            raise refusal(what, self.describe(address), answer, self.signed)

    # --- broker: messages ---------------------------------------------------------------

    def pull(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> PullResult:
        answer = self.invoke(address, _pull_request(topic, queue_id, offset, max_nums))
        return _pull_result(answer, offset)

    def send_pulls(self, address: str, pulls: Iterable[PullRequest]) -> list[int]:
        """PULL_MESSAGE for each (topic, queue id, offset, max messages) of ``pulls``, sent
        in one write without waiting (several in flight on the address's connection); the
        tickets :meth:`receive_pull` gives back with each answer. Never waited for
        (brokerDownWaitMs): a caller whose pulls fail asks again with :meth:`pull`."""
        cmds = [_pull_request(*pull) for pull in pulls]
        if self.credentials is not None:
            cmds = [sign_request(cmd, self.credentials) for cmd in cmds]
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = BlockingConnection(address, self.timeout_s)
        connection.send(*cmds)
        return [cmd.opaque for cmd in cmds]

    def receive_pull(self, address: str) -> tuple[int, PullResult]:
        """The next answer ``address`` gives to a pull :meth:`send_pulls` sent there: its
        ticket and the result (brokers may answer out of order). RemotingClientError when
        it does not come; every pull still in flight there is lost then."""
        connection = self._connections.get(address)
        if connection is None:
            raise RemotingClientError(f"answer from {address} failed: no pull is in flight")
        answer = connection.receive()
        return answer.opaque, _pull_result(answer, None)

    def query(self, address: str, topic: str, key: str, unique: bool) -> bytes:
        """QUERY_MESSAGE: the records the broker's index has under ``key`` (a KEYS token,
        or with ``unique`` a UNIQ_KEY) for ``topic``, back to back; b"" for none."""
        ext = {
            "topic": topic,
            "key": key,
            "maxNum": str(QUERY_MAX_NUM),
            "beginTimestamp": "0",
            "endTimestamp": str(JAVA_LONG_MAX),
        }
        if unique:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        answer = self.invoke(address, request(RequestCode.QUERY_MESSAGE, ext))
        if answer.code == ResponseCode.QUERY_NOT_FOUND:
            return b""
        if answer.code != ResponseCode.SUCCESS:
            what = f"query of key {key!r} in {topic}"
            raise refusal(what, self.describe(address), answer, self.signed)
        return answer.body


def _pull_request(topic: str, queue_id: int, offset: int, max_nums: int) -> RemotingCommand:
    ext = {
        "consumerGroup": READER_GROUP,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max(1, min(max_nums, PULL_BATCH))),
        "sysFlag": str(PULL_FLAG_SUBSCRIPTION),
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    return request(RequestCode.PULL_MESSAGE, ext)


def _pull_result(answer: RemotingCommand, offset: int | None) -> PullResult:
    """A PULL_MESSAGE answer's fields; ``offset`` (the pulled one, when known) stands for
    a missing nextBeginOffset (-1 when not known)."""
    fields = answer.ext_fields

    def number(name: str, default: int) -> int:
        try:
            return int(fields.get(name, default))
        except ValueError:
            return default

    return PullResult(
        code=answer.code,
        next_begin_offset=number("nextBeginOffset", -1 if offset is None else offset),
        min_offset=number("minOffset", 0),
        max_offset=number("maxOffset", 0),
        suggest_broker_id=number("suggestWhichBrokerId", MASTER_ID),
        body=answer.body,
        remark=answer.remark,
    )


def readable_brokers(routes: Iterable[BrokerRoute]) -> list[BrokerRoute]:
    """The brokers a read goes to: readable and registered with at least one address (the
    master, or a slave while the master is down)."""
    chosen = []
    for broker in routes:
        if not broker.readable:
            continue
        if not broker.addresses:
            log.warning("broker %s has no address registered: its queues are not read", broker.name)
            continue
        chosen.append(broker)
    return chosen
