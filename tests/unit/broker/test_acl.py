"""RocketMQ 4.x ACL signatures (AclClientRPCHook / AclUtils / AclSigner) and the ACL file."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.acl import (
    AclCheck,
    AclConfig,
    authorize,
    sign,
    signing_content,
    verify,
)
from rocketstore.broker.acl_file import dump_acl_document, parse_acl_document
from rocketstore.broker.codes import RequestCode
from rocketstore.errors import ConfigError

# Known vector, derived by hand from the Java algorithm:
#   ext fields {AccessKey: RocketMQ, topic: TopicTest, queueId: 0}, body b"hello".
#   TreeMap order of the keys: "AccessKey" < "queueId" < "topic" ('A' 0x41 sorts before
#   lowercase letters). Content = "RocketMQ" + "0" + "TopicTest" + "hello"
#   = b"RocketMQ0TopicTesthello". Signature = base64(HmacSHA1(b"12345678", content)),
#   computed independently with
#   printf 'RocketMQ0TopicTesthello' | openssl dgst -sha1 -hmac 12345678 -binary | base64
KNOWN_FIELDS = {"AccessKey": "RocketMQ", "topic": "TopicTest", "queueId": "0"}
KNOWN_BODY = b"hello"
KNOWN_SECRET = "12345678"
KNOWN_SIGNATURE = "/u+oQUi9gv7W/z1uifpc34q6njk="

ACL = AclConfig(accounts={"RocketMQ": KNOWN_SECRET})


def test_signing_content_order_and_body() -> None:
    assert signing_content(KNOWN_FIELDS, KNOWN_BODY) == b"RocketMQ0TopicTesthello"
    assert signing_content({**KNOWN_FIELDS, "Signature": "x"}, None) == b"RocketMQ0TopicTest"


def test_known_vector() -> None:
    assert sign(KNOWN_FIELDS, KNOWN_BODY, KNOWN_SECRET) == KNOWN_SIGNATURE


def test_vector_computed_by_the_jdk() -> None:
    # Computed with a throwaway Java 17 program: a java.util.TreeMap of these fields,
    # values concatenated (Signature skipped), UTF-8, javax.crypto.Mac "HmacSHA1" keyed
    # with the UTF-8 secret, java.util.Base64. The keys exercise TreeMap's UTF-16 order
    # (U+1F600 before U+FF01) and the value a non-ASCII character.
    fields = {
        "AccessKey": "RocketMQ",
        "OnsChannel": "ALIYUN",
        "topic": "TopicTest",
        "queueId": "0",
        "\U0001f600": "a",
        "\uff01": "b",
        "body": "\u00e9",
    }
    assert sign(fields, None, KNOWN_SECRET) == "O+NGEOl5//2tMKrCdkTlvsy9z6c="


def test_java_string_order_for_astral_characters() -> None:
    # Java compares UTF-16 code units: U+1F600 (surrogates D83D..) sorts before U+FF01,
    # while code point order would put it after.
    fields = {"\U0001f600": "a", "\uff01": "b"}
    assert signing_content(fields, None) == b"ab"


def test_non_string_values_are_signed_in_their_json_spelling() -> None:
    fields = {"AccessKey": "RocketMQ", "queueId": 0, "unitMode": False}
    assert signing_content(fields, None) == b"RocketMQ0false"
    spelled = {"AccessKey": "RocketMQ", "queueId": "0", "unitMode": "false"}
    request = {**fields, "Signature": sign(spelled, None, KNOWN_SECRET)}
    assert verify(request, None, ACL) is AclCheck.OK


def test_verify_outcomes() -> None:
    signed = {**KNOWN_FIELDS, "Signature": KNOWN_SIGNATURE}
    assert verify(signed, KNOWN_BODY, ACL) is AclCheck.OK
    assert verify(signed, b"hellO", ACL) is AclCheck.BAD_SIGNATURE
    assert verify({**signed, "queueId": "1"}, KNOWN_BODY, ACL) is AclCheck.BAD_SIGNATURE
    assert verify({**signed, "AccessKey": "Other12"}, KNOWN_BODY, ACL) is (
        AclCheck.UNKNOWN_ACCESS_KEY
    )
    assert verify(KNOWN_FIELDS, KNOWN_BODY, ACL) is AclCheck.NO_SIGNATURE
    unsigned = {k: v for k, v in signed.items() if k != "AccessKey"}
    assert verify(unsigned, KNOWN_BODY, ACL) is AclCheck.NO_ACCESS_KEY
    assert not AclCheck.BAD_SIGNATURE.ok and AclCheck.OK.ok


def test_unique_key_flag_signed_or_not() -> None:
    # The broker leaves _UNIQUE_KEY_QUERY out; the Java client adds it before signing.
    fields = {"AccessKey": "RocketMQ", "topic": "T", "key": "k"}
    without = sign(fields, None, KNOWN_SECRET)
    with_flag = sign({**fields, "_UNIQUE_KEY_QUERY": "true"}, None, KNOWN_SECRET)
    for signature in (without, with_flag):
        request = {**fields, "_UNIQUE_KEY_QUERY": "true", "Signature": signature}
        assert verify(request, None, ACL) is AclCheck.OK


fields_strategy = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: k != "Signature"),
    st.text(max_size=12),
    max_size=6,
)


@given(fields_strategy, st.binary(max_size=64), st.text(min_size=7, max_size=20))
def test_sign_then_verify(fields: dict[str, str], body: bytes, secret: str) -> None:
    request = {**fields, "AccessKey": "ak-1234"}
    signature = sign(request, body, secret)
    # Independent re-derivation of the rule (sorted by UTF-16 code units, values + body).
    ordered = sorted(request, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    content = "".join(request[k] for k in ordered).encode("utf-8") + body
    digest = hmac.new(secret.encode("utf-8"), content, hashlib.sha1).digest()
    assert signature == base64.b64encode(digest).decode("ascii")
    acl = AclConfig(accounts={"ak-1234": secret})
    assert verify({**request, "Signature": signature}, body, acl) is AclCheck.OK


# RocketMQ 4.9.8's distribution/conf/plain_acl.yml (the accounts part).
PLAIN_ACL_YML = """globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: "12345678 9"
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_load_plain_acl_yml(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(PLAIN_ACL_YML)
    assert AclConfig.load(path).accounts == {"RocketMQ": "12345678", "rocketmq2": "12345678 9"}


def test_load_yaml_with_unindented_list_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(
        "accounts: # who may connect\n"
        "- accessKey: RocketMQ # the first\n"
        "  secretKey: '12345678'\n"
        "- accessKey: second1\n"
        "  secretKey: abcdefg\n"
    )
    assert AclConfig.load(path).accounts == {"RocketMQ": "12345678", "second1": "abcdefg"}


def test_load_json(tmp_path: Path) -> None:
    path = tmp_path / "acl.json"
    path.write_text('{"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678"}]}')
    assert AclConfig.load(path).accounts == {"RocketMQ": "12345678"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"accounts": []}', "non-empty list"),
        ('{"accounts": [{"accessKey": "RocketMQ"}]}', "has no secretKey"),
        ('{"accounts": [{"accessKey": "short", "secretKey": "12345678"}]}', "7 characters"),
        (
            '{"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678"},'
            ' {"accessKey": "RocketMQ", "secretKey": "87654321"}]}',
            "appears twice",
        ),
        ("{", "not valid JSON"),
        ("accounts: inline\n", "block list"),
        ("accounts:\n  accessKey: x\n", "must be a non-empty list"),
        (
            "accounts:\n- accessKey: RocketMQ\n  secretKey: 12345678\n  topicPerms: [a]\n",
            "failed for topic:a",
        ),
        ("globalWhiteRemoteAddresses:\n- 10.1.1.400\n", "ACL address pattern"),
        ("accounts:\n\t- accessKey: x\n", "tabs"),
    ],
)
def test_bad_acl_files_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "acl.conf"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        AclConfig.load(path)


def test_missing_acl_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        AclConfig.load(tmp_path / "nope.yml")


def test_load_keeps_rocketmqs_rules(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(PLAIN_ACL_YML)
    acl = AclConfig.load(path)
    assert acl.global_white_addresses == ["10.10.103.*", "192.168.0.*"]
    first = acl.rules["RocketMQ"]
    assert not first.admin and first.default_topic_perm == 1 and first.default_group_perm == 8
    assert first.resource_perms == {
        "topicA": 1,
        "topicB": 12,
        "topicC": 8,
        "%RETRY%groupA": 1,
        "%RETRY%groupB": 12,
        "%RETRY%groupC": 8,
    }
    assert acl.rules["rocketmq2"].admin and acl.rules["rocketmq2"].white.matches("192.168.1.9")
    assert "12345678" not in repr(acl.rules["RocketMQ"])  # secrets stay out of logs


RULES_YML = """globalWhiteRemoteAddresses:
- 10.10.103.*
accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - topicA=DENY
  - topicB=PUB|SUB
  - topicC=SUB
  groupPerms:
  - groupA=DENY
- accessKey: adminKey1
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  admin: true
- accessKey: adminKey2
  secretKey: 12345678
  admin: true
  topicPerms:
  - topicA=SUB
"""


def _signed(
    ext: dict[str, str], key: str = "RocketMQ", secret: str = KNOWN_SECRET
) -> dict[str, str]:
    fields = {**ext, "AccessKey": key}
    return {**fields, "Signature": sign(fields, None, secret)}


def _rules() -> AclConfig:
    return AclConfig.from_document(parse_acl_document(RULES_YML, "t"), "t")


def _send(topic: str, key: str = "RocketMQ") -> tuple[AclCheck, str]:
    ext = _signed({"b": topic, "a": "P"}, key)
    verdict = authorize(RequestCode.SEND_MESSAGE_V2, ext, None, "127.0.0.1", _rules())
    return verdict.check, verdict.message


def test_authorize_topics_as_rocketmq() -> None:
    assert _send("topicB") == (AclCheck.OK, "")
    assert _send("topicA") == (AclCheck.DENIED, "No default permission for topic:topicA")
    assert _send("topicC")[0] is AclCheck.DENIED  # SUB only
    assert _send("other")[0] is AclCheck.DENIED  # defaultTopicPerm DENY
    assert _send("RMQ_SYS_TRACE_TOPIC")[0] is AclCheck.OK  # traces always pass
    assert _send("anything", "adminKey2")[0] is AclCheck.DENIED  # admin with perms: DENY default
    assert _send("anything", "adminKey1")[0] is AclCheck.OK  # admin without perms: all


def test_authorize_groups_as_rocketmq() -> None:
    acl = _rules()
    pull = {"topic": "topicC", "consumerGroup": "groupB", "queueId": "0"}
    assert authorize(RequestCode.PULL_MESSAGE, _signed(pull), None, "127.0.0.1", acl).ok
    denied = authorize(
        RequestCode.PULL_MESSAGE, _signed({**pull, "consumerGroup": "groupA"}), None, "1.1.1.1", acl
    )
    assert (denied.check, denied.message) == (
        AclCheck.DENIED,
        "No default permission for group:groupA",
    )


def test_authorize_admin_codes_and_identity() -> None:
    acl = _rules()
    for code in (RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_EXPIRED_COMMITLOG):
        verdict = authorize(code, _signed({}), None, "127.0.0.1", acl)
        assert verdict.check is AclCheck.NOT_ADMIN
        assert verdict.message == (
            f"Need admin permission for request code={int(code)}, but accessKey=RocketMQ is not"
        )
        assert authorize(code, _signed({}, "adminKey1"), None, "127.0.0.1", acl).ok
    wrong = _signed({}, secret="not-the-secret")
    verdict = authorize(RequestCode.GET_BROKER_CONFIG, wrong, None, "127.0.0.1", acl)
    assert (verdict.check, verdict.message) == (
        AclCheck.BAD_SIGNATURE,
        "Check signature failed for accessKey=RocketMQ",
    )
    unknown = authorize(RequestCode.GET_BROKER_CONFIG, _signed({}, "Nobody1"), None, "", acl)
    assert (unknown.check, unknown.message) == (
        AclCheck.UNKNOWN_ACCESS_KEY,
        "No acl config for Nobody1",
    )
    bare = authorize(RequestCode.GET_BROKER_CONFIG, {}, None, "127.0.0.1", acl)
    assert (bare.check, bare.message) == (AclCheck.NO_ACCESS_KEY, "No accessKey is configured")


def test_white_lists_as_rocketmq() -> None:
    acl = _rules()
    # The global white list lets anything through, unsigned.
    assert authorize(RequestCode.UPDATE_BROKER_CONFIG, {}, None, "10.10.103.7", acl).ok
    # An account's white list lets its requests through unsigned (its own rights).
    unsigned = {"AccessKey": "adminKey1"}
    assert authorize(RequestCode.UPDATE_BROKER_CONFIG, unsigned, None, "192.168.1.3", acl).ok
    outside = authorize(RequestCode.UPDATE_BROKER_CONFIG, unsigned, None, "192.168.2.3", acl)
    assert outside.check is AclCheck.NO_SIGNATURE


def test_an_unreadable_request_is_refused_even_from_a_white_address() -> None:
    verdict = authorize(RequestCode.HEART_BEAT, {}, b"{", "10.10.103.7", _rules())
    assert verdict.check is AclCheck.BAD_REQUEST


def test_a_hand_built_config_authenticates_only() -> None:
    acl = AclConfig(accounts={"RocketMQ": KNOWN_SECRET})
    ext = _signed({"b": "Any", "a": "P"})
    assert authorize(RequestCode.SEND_MESSAGE_V2, ext, None, "127.0.0.1", acl).ok
    assert authorize(RequestCode.UPDATE_BROKER_CONFIG, _signed({}), None, "127.0.0.1", acl).ok


def test_the_file_round_trips_through_the_writer() -> None:
    document = parse_acl_document(RULES_YML, "t")
    document["dataVersion"] = [{"counter": 3, "timestamp": 1700000000000}]
    document["accounts"][0]["secretKey"] = "it's: #odd"
    text = dump_acl_document(document)
    assert parse_acl_document(text, "t") == document
    assert "- accessKey: RocketMQ\n" in text and "  secretKey: 'it''s: #odd'\n" in text
