"""A name server with an ACL (issue #40): route and setting changes only from an admin
account or a white-listed address, so an unauthenticated REGISTER_BROKER cannot take over
a broker's route; a broker with the same ACL file signs its registrations."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from rocketstore.broker.acl import AclConfig, sign
from rocketstore.broker.acl_file import parse_acl_document
from rocketstore.broker.admin_client import topic_route
from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.namesrv import NameServer
from rocketstore.broker.remoting import RemotingCommand
from tests.unit.broker.broker_helpers import FakeConnection, small_store

ACL = """globalWhiteRemoteAddresses:
- 10.9.9.*
accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: true
- accessKey: notAdmin1
  secretKey: 12345678
  defaultTopicPerm: PUB|SUB
"""

BODY = json.dumps(
    {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": {"T": {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4}},
            "dataVersion": {"counter": 1, "timestamp": 1},
        }
    }
).encode()


def _register(addr: str, key: str | None = None, secret: str = "12345678") -> RemotingCommand:
    ext = {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": "C", "brokerId": "0"}
    if key is not None:
        ext["AccessKey"] = key
        ext["Signature"] = sign(ext, BODY, secret)
    return request(RequestCode.REGISTER_BROKER, ext, BODY)


def _namesrv() -> NameServer:
    namesrv = NameServer()
    acl = AclConfig.from_document(parse_acl_document(ACL, "t"))
    namesrv.acl = lambda: acl
    return namesrv


def test_registration_needs_an_admin_or_a_white_address() -> None:
    namesrv = _namesrv()
    loopback = FakeConnection(peer="127.0.0.1:5000")
    refused = namesrv.handle_sync(_register("6.6.6.6:10911"), loopback)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "ACL check failed: NO_ACCESS_KEY: No accessKey is configured"
    not_admin = namesrv.handle_sync(_register("6.6.6.6:10911", "notAdmin1"), loopback)
    assert not_admin.code == ResponseCode.NO_PERMISSION
    assert "Need admin permission for request code=103" in (not_admin.remark or "")
    assert namesrv.table.route("T") is None
    ok = namesrv.handle_sync(_register("127.0.0.1:10911", "RocketMQ"), loopback)
    assert ok.code == ResponseCode.SUCCESS
    white = namesrv.handle_sync(_register("10.9.9.1:10911"), FakeConnection(peer="10.9.9.1:1"))
    assert white.code == ResponseCode.SUCCESS
    # Reads stay open: clients ask routes unsigned.
    route = namesrv.handle_sync(
        request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), loopback
    )
    assert route.code == ResponseCode.SUCCESS


def test_a_rogue_registration_does_not_take_the_route(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    acl.chmod(0o644)
    (tmp_path / "store").mkdir(mode=0o755)
    (tmp_path / "store").chmod(0o755)
    options = BrokerOptions(
        str(tmp_path / "store"), listen="127.0.0.1:0", store_config=small_store()
    )
    options.acl_file = str(acl)
    with BackgroundServer(options) as server:  # registered, signed with RocketMQ's account
        real = server.broker_address
        before = topic_route(server.namesrv_address, "TBW102")
        assert before is not None
        assert [b["brokerAddrs"]["0"] for b in before["brokerDatas"]] == [real]
        answer = invoke_sync(server.namesrv_address, _register("6.6.6.6:10911"))
        assert answer.code == ResponseCode.NO_PERMISSION
        after = topic_route(server.namesrv_address, "TBW102")
        assert after is not None
        assert [b["brokerAddrs"]["0"] for b in after["brokerDatas"]] == [real]
    # With ACL on, the store is closed to other users, and the open ACL file is named.
    assert stat.S_IMODE((tmp_path / "store").stat().st_mode) == 0o700
    assert "readable by other users" in caplog.text
    assert "was open to other users (mode 755)" in caplog.text
    assert "12345678" not in caplog.text  # no secret in any log line
