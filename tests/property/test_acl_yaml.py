"""The built-in plain_acl.yml reader and writer (rocketstore.broker.acl_file) against PyYAML,
a YAML 1.1 library like the SnakeYAML 1.x RocketMQ reads the file with: the reader never
reads a document differently from PyYAML (it may refuse one, naming the line); what the
writer writes PyYAML reads back as the same document."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketstore.broker.acl_file import dump_acl_document, parse_acl_document
from rocketstore.errors import ConfigError

yaml = pytest.importorskip("yaml")

# Key and secret characters, YAML's indicators among them, and any text at all.
_ACLISH = st.text(alphabet="abcXYZ019._-*|=,:{}[]@%#'\" !?&~/", max_size=20)
_ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
_SCALAR = st.one_of(_ACLISH, _ANY_TEXT, st.booleans(), st.integers(-(10**12), 10**12), st.none())
_FIELDS = st.sampled_from(
    ["accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "x y"]
)
_ACCOUNT = st.dictionaries(_FIELDS, _SCALAR, max_size=6) | st.fixed_dictionaries(
    {
        "accessKey": _ACLISH,
        "topicPerms": st.lists(_ACLISH, max_size=3),
        "groupPerms": st.lists(_ACLISH, max_size=3),
    }
)
_VERSION = st.fixed_dictionaries(
    {"counter": st.integers(0, 10**6), "timestamp": st.integers(0, 2**62)}
)
DOCUMENTS = st.fixed_dictionaries(
    {"accounts": st.lists(_ACCOUNT, max_size=3)},
    optional={
        "globalWhiteRemoteAddresses": st.lists(_SCALAR, max_size=3),
        "dataVersion": st.lists(_VERSION, max_size=2),
    },
)
# Lines of YAML-looking tokens: syntax, YAML 1.1's typed scalars, what the reader refuses.
_TOKENS = st.sampled_from(
    ["accounts:", "- ", "  ", "accessKey: ", "a", "b: ", "'x'", '"y\\x41"', "#c", "\n",
     "[a, b]", "{k: v}", ":", "yes", "012", "0x1F", "1_000", "1:30", "1.5", "2020-01-01",
     "~", "null", "True", "-", " ", "&a", "|", "\t", "'", '"', ",", "%", "@"]
)  # fmt: skip


def _string_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_string_keys(v) for v in value)
    return True


@settings(max_examples=500)
@given(DOCUMENTS)
def test_what_pyyaml_writes_is_read_as_pyyaml_reads_it_or_refused(document: Any) -> None:
    text = yaml.safe_dump(document, default_flow_style=False, allow_unicode=True, sort_keys=False)
    try:
        ours = parse_acl_document(text, "plain_acl.yml")
    except ConfigError:
        return  # (multi-line quoted scalars: PyYAML folds long unprintable ones)
    assert ours == yaml.safe_load(text)


@settings(max_examples=500)
@given(DOCUMENTS)
@example({"globalWhiteRemoteAddresses": ["\u2028"]})  # a line break to YAML: escaped
def test_what_the_writer_writes_reads_back_the_same_in_pyyaml_and_here(document: Any) -> None:
    text = dump_acl_document(document)
    assert yaml.safe_load(text) == document
    assert parse_acl_document(text, "plain_acl.yml") == document


@settings(max_examples=1000)
@given(st.lists(_TOKENS, max_size=25).map("".join))
@example("&aaccounts:accounts:")  # an anchor before a key: once read as part of the name
@example("!!str 1: x\n*a: y")  # a tag, an alias
def test_any_text_is_read_as_pyyaml_reads_it_or_refused(text: str) -> None:
    try:
        theirs = yaml.safe_load(text)
    except yaml.YAMLError:
        return  # the reader is more lenient than YAML (a tab-only line...): not a misreading
    try:
        ours = parse_acl_document(text, "plain_acl.yml")
    except ConfigError:
        return
    if isinstance(theirs, dict) and _string_keys(theirs):  # keys stay text here: ACL names
        assert ours == theirs


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("12345678", 12345678),
        ("01234567", 0o1234567),  # YAML 1.1 octal: RocketMQ's key is then "342391"
        ("0x1F", 31),
        ("1_000", 1000),
        ("1:30", 90),
        ("yes", True),
        ("Off", False),
        ("~", None),
        ("'01234567'", "01234567"),
        ('"a\\x41\\u00e9\\U0001F600\\t"', "aA\u00e9\U0001f600\t"),
        ("192.168.0.*", "192.168.0.*"),
    ],
)
def test_plain_scalars_are_typed_as_snakeyaml_types_them(value: str, read: object) -> None:
    assert parse_acl_document(f"secretKey: {value}\n", "t") == {"secretKey": read}
    assert yaml.safe_load(f"secretKey: {value}\n") == {"secretKey": read}


@pytest.mark.parametrize("value", ["1.5", "1e5", ".inf", "2020-01-01", "2020-1-1 10:00:00"])
def test_a_float_or_a_date_is_refused_naming_the_line(value: str) -> None:
    with pytest.raises(ConfigError, match=r"line 2: .* reads as a YAML number or date: quote it"):
        parse_acl_document(f"accounts:\n- secretKey: {value}\n", "t")


@pytest.mark.parametrize(
    "secret", ["yes", "on", "01234567", "1.5", "@home", "|pipe", "%x", "a:", "-", "2020-01-01"]
)
def test_the_writer_quotes_what_yaml_would_read_as_something_else(secret: str) -> None:
    text = dump_acl_document({"accounts": [{"accessKey": "RocketMQ", "secretKey": secret}]})
    assert yaml.safe_load(text)["accounts"][0]["secretKey"] == secret
    assert parse_acl_document(text, "t")["accounts"][0]["secretKey"] == secret
