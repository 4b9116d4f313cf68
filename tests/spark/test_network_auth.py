"""The network mode's signing and its wait for a broker that is down, without Spark or
a broker process (#35): options accessKey / secretKey / brokerDownWaitMs, requests signed
as the broker's own checker verifies them, the bounded retry with backoff."""

from __future__ import annotations

import pytest

from rocketstore.broker.acl import AclCheck, AclConfig, verify
from rocketstore.errors import ConfigError
from rocketstore.remoting.acl_signing import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    SessionCredentials,
    sign_request,
)
from rocketstore.remoting.blocking import RemotingClientError, request
from rocketstore.remoting.codec import RemotingCommand
from rocketstore.remoting.codes import RequestCode, ResponseCode
from rocketstore.spark.network_cluster import Backoff, Cluster
from rocketstore.spark.options import parse_options, parse_stream_options
from rocketstore.spark.write_options import parse_write_options

NAMESRV = "10.9.9.9:9876"
ACL = AclConfig(accounts={"RocketMQ": "12345678"})
KEYS = SessionCredentials("RocketMQ", "12345678")


def test_signed_requests_pass_the_brokers_check() -> None:
    pull = request(RequestCode.PULL_MESSAGE, {"topic": "T", "queueId": "1"}, b"")
    signed = sign_request(pull, KEYS)
    assert pull.ext_fields == {"topic": "T", "queueId": "1"}  # a copy is signed
    assert signed.ext_fields[ACCESS_KEY] == "RocketMQ" and SIGNATURE in signed.ext_fields
    assert verify(signed.ext_fields, signed.body, ACL) is AclCheck.OK
    send = sign_request(request(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"body"), KEYS)
    assert verify(send.ext_fields, send.body, ACL) is AclCheck.OK
    assert verify(send.ext_fields, b"other body", ACL) is AclCheck.BAD_SIGNATURE
    wrong = sign_request(pull, SessionCredentials("RocketMQ", "not-the-secret"))
    assert verify(wrong.ext_fields, wrong.body, ACL) is AclCheck.BAD_SIGNATURE


def test_a_unique_key_query_is_signed_without_its_flag_as_a_java_broker_checks() -> None:
    ext = {"topic": "T", "key": "U1", UNIQUE_MSG_QUERY_FLAG: "true"}
    signed = sign_request(request(RequestCode.QUERY_MESSAGE, ext), KEYS)
    # PlainAccessValidator leaves the flag out; so does the signature.
    without = {k: v for k, v in signed.ext_fields.items() if k != UNIQUE_MSG_QUERY_FLAG}
    assert verify(without, None, ACL) is AclCheck.OK
    assert verify(signed.ext_fields, None, ACL) is AclCheck.OK


def test_the_broker_keeps_its_public_signing_names() -> None:
    from rocketstore.broker import acl
    from rocketstore.remoting import acl_signing

    assert acl.sign is acl_signing.sign and acl.signing_content is acl_signing.signing_content


def test_credential_options() -> None:
    read = parse_options({"namesrv": NAMESRV, "accessKey": "RocketMQ", "secretKey": "12345678"})
    assert read.credentials == KEYS
    assert "12345678" not in repr(read)  # the secret stays out of logs and plans
    write = parse_write_options(
        {"namesrv": NAMESRV, "accesskey": "RocketMQ", "secretkey": "12345678"}, streaming=False
    )
    assert write.credentials == KEYS
    assert parse_options({"namesrv": NAMESRV}).credentials is None
    with pytest.raises(ConfigError, match="option accessKey is given without option secretKey"):
        parse_options({"namesrv": NAMESRV, "accessKey": "RocketMQ"})
    with pytest.raises(ConfigError, match="option secretKey is given without option accessKey"):
        parse_write_options({"namesrv": NAMESRV, "secretKey": "x"}, streaming=True)
    with pytest.raises(ConfigError, match="they need option namesrv"):
        parse_options({"path": "/s", "accessKey": "RocketMQ", "secretKey": "12345678"})
    with pytest.raises(ConfigError, match="option accessKey is empty"):
        parse_options({"namesrv": NAMESRV, "accessKey": " ", "secretKey": "12345678"})


def test_broker_down_wait_option() -> None:
    assert parse_options({"namesrv": NAMESRV}).broker_down_wait_ms == 0
    stream = parse_stream_options({"namesrv": NAMESRV, "brokerDownWaitMs": "60000"})
    assert stream.read.broker_down_wait_ms == 60_000
    with pytest.raises(ConfigError, match="brokerDownWaitMs='-1' must be >= 0"):
        parse_options({"namesrv": NAMESRV, "brokerDownWaitMs": "-1"})
    with pytest.raises(ConfigError, match=r"brokerDownWaitMs='5' waits for brokers .* namesrv"):
        parse_options({"path": "/s", "brokerDownWaitMs": "5"})


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 3))
        self.now_s += seconds


class FlakyCluster(Cluster):
    """Fails the first ``failures`` requests as a broker that is down does."""

    def __init__(self, failures: int, wait_ms: int, clock: FakeClock) -> None:
        super().__init__(
            NAMESRV, broker_down_wait_ms=wait_ms, clock_s=clock, sleep_s=clock.sleep,
            credentials=KEYS,
        )  # fmt: skip
        self.failures = failures
        self.sent: list[RemotingCommand] = []

    def _invoke_once(self, address: str, cmd: RemotingCommand) -> RemotingCommand:
        self.sent.append(cmd)
        if len(self.sent) <= self.failures:
            raise RemotingClientError(f"request code {cmd.code} to {address} failed: refused")
        return cmd.response(ResponseCode.SUCCESS, None)


def test_a_broker_that_comes_back_within_the_wait_is_waited_for() -> None:
    clock = FakeClock()
    cluster = FlakyCluster(failures=5, wait_ms=10_000, clock=clock)
    answer = cluster.invoke("10.0.0.1:10911", request(RequestCode.GET_MAX_OFFSET, {}))
    assert answer.code == ResponseCode.SUCCESS
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6]  # exponential backoff
    # Every attempt is signed (the broker checks each one).
    assert all(verify(c.ext_fields, c.body, ACL) is AclCheck.OK for c in cluster.sent)


def test_a_broker_that_stays_down_fails_after_the_wait_naming_it() -> None:
    clock = FakeClock()
    cluster = FlakyCluster(failures=1000, wait_ms=5_000, clock=clock)
    cluster.know("broker-b", ((0, "10.0.0.2:10911"),))
    with pytest.raises(RemotingClientError, match=r"broker broker-b \(10.0.0.2:10911\) did not "
                       r"come back within brokerDownWaitMs=5000 \(6 retries\)"):  # fmt: skip
        cluster.invoke("10.0.0.2:10911", request(RequestCode.GET_MAX_OFFSET, {}))
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6, 1.9]  # never past the deadline
    assert clock.now_s == pytest.approx(105.0)


def test_no_wait_by_default_and_none_for_name_servers() -> None:
    clock = FakeClock()
    cluster = FlakyCluster(failures=1, wait_ms=0, clock=clock)
    with pytest.raises(RemotingClientError, match="refused"):
        cluster.invoke("10.0.0.1:10911", request(RequestCode.GET_MAX_OFFSET, {}))
    waiting = FlakyCluster(failures=1, wait_ms=10_000, clock=clock)
    with pytest.raises(RemotingClientError, match="refused"):
        waiting.invoke(NAMESRV, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}), wait=False)
    assert clock.sleeps == []


def test_backoff_without_a_wait_gives_up_at_once() -> None:
    clock = FakeClock()
    assert not Backoff(0, clock, clock.sleep).again()
    assert clock.sleeps == []
