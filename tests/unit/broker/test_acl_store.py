"""The ACL file reloaded when it changes and edited by the ACL admin requests
(PlainPermissionManager + AclFileWatchService, 4.9.8), written atomically, mode 0600."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from rocketstore.broker.acl_file import parse_acl_document
from rocketstore.broker.acl_store import AclFile
from rocketstore.errors import ConfigError

FIRST = """accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: true
"""


def _file(tmp_path: Path, text: str = FIRST) -> tuple[Path, AclFile, list[object]]:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)
    seen: list[object] = []
    return path, AclFile(str(path), seen.append), seen


def _rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()  # a later mtime, even on a coarse clock
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_an_edited_file_is_reloaded(tmp_path: Path) -> None:
    path, acl_file, seen = _file(tmp_path)
    assert not acl_file.poll()  # unchanged
    _rewrite(path, FIRST + "- accessKey: second1\n  secretKey: abcdefgh\n")
    assert acl_file.poll()
    assert set(acl_file.config.accounts) == {"RocketMQ", "second1"}
    assert seen == [acl_file.config]
    os.utime(path, ns=(0, 10**18))  # touched, same content: nothing to do
    assert not acl_file.poll()


def test_a_broken_edit_keeps_the_rules_in_use(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, acl_file, seen = _file(tmp_path)
    before = acl_file.config
    _rewrite(path, "accounts:\n- accessKey: short\n  secretKey: 12345678\n")
    with caplog.at_level(logging.ERROR):
        assert not acl_file.poll()
    assert acl_file.config is before and seen == []
    assert "rules in use are kept" in caplog.text


def test_update_account_creates_then_changes_given_fields(tmp_path: Path) -> None:
    path, acl_file, _ = _file(tmp_path)
    fields: dict[str, object] = {
        "accessKey": "limited1",
        "secretKey": "limited-secret",
        "defaultTopicPerm": "SUB",
        "topicPerms": ["A=PUB", "B=DENY"],
        "groupPerms": None,
        "admin": False,
    }
    acl_file.update_account(fields)
    rule = acl_file.config.rules["limited1"]
    assert rule.resource_perms == {"A": 4, "B": 1} and rule.default_topic_perm == 8
    assert acl_file.config.data_version["counter"] == 1
    acl_file.update_account({"accessKey": "limited1", "secretKey": "other-secret", "admin": True})
    rule = acl_file.config.rules["limited1"]
    assert rule.admin and rule.secret_key == "other-secret"
    assert rule.resource_perms == {"A": 4, "B": 1}  # fields not given are kept
    assert acl_file.config.data_version["counter"] == 2
    document = parse_acl_document(path.read_text(), "t")
    assert [a["accessKey"] for a in document["accounts"]] == ["RocketMQ", "limited1"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not (tmp_path / "plain_acl.yml.bak").exists()  # no copy of the secrets left


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"accessKey": "short", "secretKey": "12345678"}, "longer than 6"),
        (
            {"accessKey": "longenough", "secretKey": "12345678", "topicPerms": ["A=READ"]},
            "expected",
        ),
        ({"accessKey": "longenough", "secretKey": "1234567", "whiteRemoteAddress": "x"}, "pattern"),
    ],
)
def test_update_account_refuses_bad_fields(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    path, acl_file, _ = _file(tmp_path)
    with pytest.raises(ConfigError, match=message):
        acl_file.update_account(fields)
    assert path.read_text() == FIRST
    assert "12345678" not in str(message)


def test_delete_account_and_global_white_list(tmp_path: Path) -> None:
    path, acl_file, _ = _file(tmp_path, FIRST + "- accessKey: second1\n  secretKey: abcdefgh\n")
    assert not acl_file.delete_account("nobody1")
    assert acl_file.delete_account("second1")
    assert set(acl_file.config.accounts) == {"RocketMQ"}
    acl_file.update_global_white_addresses(["10.1.1.*", "192.168.0.{1,2}"])
    assert acl_file.config.global_white_addresses == ["10.1.1.*", "192.168.0.{1,2}"]
    assert acl_file.config.global_white[1].matches("192.168.0.2")
    with pytest.raises(ConfigError, match="ACL address pattern"):
        acl_file.update_global_white_addresses(["10.1.1.300"])
    assert acl_file.config.global_white_addresses == ["10.1.1.*", "192.168.0.{1,2}"]
    assert parse_acl_document(path.read_text(), "t")["dataVersion"][0]["counter"] == 2
