"""The global ``-c/--config broker.conf``: store settings, the store directory, and the
broker's own settings from a RocketMQ settings file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.cli.context import CliError, context_from_settings
from rocketstore.cli.serve_options import make_options as _make_options
from rocketstore.format import index_layout as layout
from rocketstore.paths import index_dir
from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]

ODD_CONF = "# the broker's own file\nbrokerName=broker-b\nmaxHashSlotNum=16\nmaxIndexNum = 32\n"


def _store_with_one_empty_odd_index_file(root: Path) -> None:
    """A store whose only index file has no entries and a size no 1:4 geometry fits
    (16 x 32): nothing in the directory tells its geometry."""
    config = StoreConfig(
        mapped_file_size_commit_log=1 << 20, max_hash_slot_num=16, max_index_num=32
    )
    with MessageStore.open(root, config) as store:
        assert store.put(Message("T", b"m0", properties={"KEYS": "k0"})).ok
    directory = Path(index_dir(str(root)))
    for name in os.listdir(directory):
        os.remove(directory / name)
    (directory / "20260101000000000").write_bytes(bytes(layout.file_size(16, 32)))


def test_a_writer_takes_the_index_geometry_from_the_settings_file(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "store"
    _store_with_one_empty_odd_index_file(root)
    refused = cli("--store", root, "sendMessage", "-t", "T", "-p", "m1", "-k", "k1")
    assert refused.code == 1
    assert "max_hash_slot_num and max_index_num" in refused.err
    conf = tmp_path / "broker.conf"
    conf.write_text(ODD_CONF)
    sent = cli("-c", conf, "--store", root, "sendMessage", "-t", "T", "-p", "m1", "-k", "k1")
    assert sent.code == 0, sent.err
    found = cli("--store", root, "--json", "queryMsgByKey", "-t", "T", "-k", "k1")
    assert found.code == 0, found.err
    assert [m["keys"] for m in found.json_lines()] == ["k1"]
    stats = cli("-c", conf, "--store", root, "--json", "stats")
    (summary,) = stats.json_lines()
    assert (summary["index"]["hashSlots"], summary["index"]["entriesPerFile"]) == (16, 32)
    check = cli("--config", conf, "--store", root, "check")
    assert check.code == 0, check.out + check.err


def test_the_store_is_the_files_store_path_unless_store_is_given(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "from-conf"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={root}\nstorePathCommitLog={root}/commitlog\n")
    assert cli("-c", conf, "sendMessage", "-t", "T", "-p", "x").code == 0
    assert cli("--store", root, "topicList").out == "T\n"
    other = tmp_path / "other"
    assert cli("-c", conf, "--store", other, "sendMessage", "-t", "U", "-p", "x").code == 0
    assert cli("--store", other, "topicList").out == "U\n"
    assert cli("--store", root, "topicList").out == "T\n"


def test_settings_a_store_cannot_honour_are_refused(tmp_path: Path, cli: Cli) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("maxIndexNum=lots\n")
    bad = cli("-c", conf, "--store", tmp_path, "topicList")
    assert bad.code == 1
    assert bad.err.strip() == (
        f"rocketstore: error: {conf}: maxIndexNum must be a Java int, got 'lots' (RocketMQ "
        "ignores a value it cannot read and keeps its default)"
    )
    missing = cli("-c", tmp_path / "nope.conf", "topicList")
    assert missing.code == 1
    assert f"cannot read settings file {tmp_path / 'nope.conf'}" in missing.err


def _serve_options(conf: Path, **given: object) -> dict[str, object]:
    kwargs: dict[str, object] = {
        "store_override": None,
        "listen": None,
        "advertise": None,
        "broker_name": None,
        "cluster": None,
        "flush": None,
        "no_auto_create": False,
        "enable_property_filter": False,
        "offset_persist_ms": None,
        "acl_file": None,
    }
    kwargs.update(given)
    return kwargs


def test_the_broker_takes_its_settings_from_the_file_and_options_win(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=Prod\nbrokerName=broker-b\nlistenPort=10921\nflushDiskType=SYNC_FLUSH\n"
        "autoCreateTopicEnable=false\ndefaultTopicQueueNums=8\n"
        "flushConsumerOffsetInterval=1000\nmaxIndexNum=64\nfilterSupportRetry=true\n"
    )
    ctx = context_from_settings(str(conf), "./store", False, as_json=False, debug=False)
    options = _make_options(ctx, _serve_options(conf))
    assert options.listen == "127.0.0.1:10921"
    broker = options.broker
    assert (broker.broker_cluster_name, broker.broker_name) == ("Prod", "broker-b")
    assert broker.filter_support_retry is True and broker.enable_property_filter is False
    assert _make_options(
        ctx, _serve_options(conf, enable_property_filter=True)
    ).broker.enable_property_filter
    assert broker.auto_create_topic_enable is False
    assert broker.default_topic_queue_nums == 8
    assert broker.flush_consumer_offset_interval_ms == 1000
    assert options.store_config is not None
    assert options.store_config.flush_disk_type == "SYNC_FLUSH"
    assert options.store_config.max_index_num == 64
    given = _make_options(
        ctx,
        _serve_options(conf, listen="127.0.0.1:10999", broker_name="broker-c", flush="ASYNC_FLUSH"),
    )
    assert given.listen == "127.0.0.1:10999"
    assert given.broker.broker_name == "broker-c"
    assert given.broker.broker_cluster_name == "Prod"
    assert given.store_config is not None
    assert given.store_config.flush_disk_type == "ASYNC_FLUSH"
    # Without a file: the defaults the options used to show.
    plain = context_from_settings(None, "./store", False, as_json=False, debug=False)
    defaults = _make_options(plain, _serve_options(conf))
    assert defaults.listen == "127.0.0.1:10911"
    assert (defaults.broker.broker_name, defaults.broker.broker_cluster_name) == (
        "broker-a",
        "DefaultCluster",
    )
    assert defaults.broker.flush_consumer_offset_interval_ms == 5000
    assert defaults.store_config is not None
    assert defaults.store_config.flush_disk_type == "ASYNC_FLUSH"
    # The broker's recovery refuses to cut readable records after damage (as sendMessage).
    assert options.store_config.cut_damaged_commitlog is False
    assert defaults.store_config.cut_damaged_commitlog is False


def test_rebuilding_with_indexing_off_still_rebuilds_the_index(tmp_path: Path, cli: Cli) -> None:
    """messageIndexEnable=false stops a broker adding to the index; a rebuild or repair
    asked for under such a file moves the index aside and must still make it again."""
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for i in range(20):
            assert store.put(Message("T", b"m%d" % i, i % 2, properties={"KEYS": f"k{i}"})).ok
    conf = tmp_path / "noindex.conf"
    conf.write_text("messageIndexEnable=false\n")
    for args in (("rebuild",), ("rebuild", "--index"), ("rebuild", "--engine", "local")):
        run = cli("-c", conf, "--store", root, *args)
        assert run.code == 0, run.err
        found = cli("--store", root, "--json", "queryMsgByKey", "-t", "T", "-k", "k7")
        assert [m["keys"] for m in found.json_lines()] == ["k7"], args
    for unit in (root / "consumequeue" / "T" / "1").iterdir():
        unit.unlink()
    repaired = cli("-c", conf, "--store", root, "check", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    found = cli("--store", root, "--json", "queryMsgByKey", "-t", "T", "-k", "k7")
    assert [m["keys"] for m in found.json_lines()] == ["k7"]


def test_the_store_host_comes_from_broker_ip1_and_listen_port(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerIP1=localhost\nlistenPort=10921\n")  # a name, resolved
    sent = cli("-c", conf, "--store", root, "--json", "sendMessage", "-t", "T", "-p", "x")
    assert sent.code == 0, sent.err
    (message,) = cli("--store", root, "--json", "printMsg", "-t", "T").json_lines()
    assert message["storeHost"] == "127.0.0.1:10921"
    conf.write_text("brokerIP1=broker-a.invalid\n")  # no such host: readers still work
    assert cli("-c", conf, "--store", root, "topicList").out == "T\n"
    refused = cli("-c", conf, "--store", root, "sendMessage", "-t", "T", "-p", "y")
    assert refused.code == 1
    assert "brokerIP1/listenPort give no store host" in refused.err
    conf.write_text("listenPort=http\n")
    assert (
        "listenPort must be a port number"
        in cli("-c", conf, "--store", root, "sendMessage", "-t", "T", "-p", "y").err
    )


def test_a_broker_interval_rocketmq_would_not_start_with_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("flushConsumerOffsetInterval=0\n")
    ctx = context_from_settings(str(conf), "./store", False, as_json=False, debug=False)
    with pytest.raises(
        CliError, match=r"flush_consumer_offset_interval_ms must be 1\.\.2147483647 \(ms\), got 0"
    ):
        _make_options(ctx, _serve_options(conf))


def test_the_commitlog_paths_of_the_file_follow_its_store(tmp_path: Path) -> None:
    """storePathCommitLog applies to the file's own store (no --store, or --store naming
    storePathRootDir); --store naming another directory (a copy) reads that one's
    commitlog/, for every command and for serve's own --store."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={tmp_path}/s\nstorePathCommitLog=/d1/log,/d2/log\n"
        "readOnlyCommitLogStorePaths=/d0/log\n"
    )
    own = context_from_settings(str(conf), "./store", False, as_json=False, debug=False)
    assert own.commitlog_dirs.writable == ("/d1/log", "/d2/log")
    assert own.commitlog_dirs.read_only == ("/d0/log",)
    same = context_from_settings(str(conf), f"{tmp_path}/s", True, as_json=False, debug=False)
    assert same.commitlog_dirs == own.commitlog_dirs
    copy = context_from_settings(str(conf), f"{tmp_path}/c", True, as_json=False, debug=False)
    assert copy.commitlog_dirs.all == (f"{tmp_path}/c/commitlog",)
    served = _make_options(own, _serve_options(conf, store_override=str(tmp_path / "c")))
    assert served.store_config is not None
    assert served.store_config.commit_log_dirs(str(tmp_path / "c")).all == (
        f"{tmp_path}/c/commitlog",
    )
    kept = _make_options(own, _serve_options(conf))
    assert kept.store_config is not None
    assert kept.store_config.store_path_commit_log == "/d1/log,/d2/log"


def test_commitlog_paths_inside_the_files_root_move_with_a_copy(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    root = tmp_path / "s"
    conf.write_text(
        f"storePathRootDir={root}\nstorePathCommitLog={root}/commitlog/b,{root}/commitlog/a\n"
    )
    copy = context_from_settings(str(conf), f"{tmp_path}/c", True, as_json=False, debug=False)
    assert copy.commitlog_dirs.writable == (
        f"{tmp_path}/c/commitlog/b",
        f"{tmp_path}/c/commitlog/a",
    )
    assert copy.commitlog_dirs.multi_path
    # A link to the file's root is that root: the paths stay as they are.
    root.mkdir()
    (tmp_path / "link").symlink_to(root)
    linked = context_from_settings(str(conf), f"{tmp_path}/link", True, as_json=False, debug=False)
    assert linked.commitlog_dirs.writable == (f"{root}/commitlog/b", f"{root}/commitlog/a")


def test_commitlog_paths_outside_the_files_root_stay_behind(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={tmp_path}/s\n"
        f"storePathCommitLog={tmp_path}/s/commitlog/a,{tmp_path}/elsewhere/b\n"
    )
    copy = context_from_settings(str(conf), f"{tmp_path}/c", True, as_json=False, debug=False)
    assert copy.commitlog_dirs.writable == (f"{tmp_path}/c/commitlog/a",)
    assert copy.commitlog_dirs.multi_path  # still a multi-path list, of one


def test_the_broker_name_printed_is_the_files(tmp_path: Path, cli: Cli) -> None:
    """Where mqadmin prints the broker's name (message lines, queue lines, tables), the
    CLI prints the settings file's brokerName; without a file, localStore."""
    root = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(ODD_CONF)  # brokerName=broker-b
    sent = cli("-c", conf, "--store", root, "sendMessage", "-t", "T", "-p", "x", "-i", "0")
    assert sent.code == 0, sent.err
    assert sent.out.splitlines()[1].startswith("broker-b ")
    printed = cli("-c", conf, "--store", root, "printMsg", "-t", "T").out.splitlines()
    assert (
        printed[0]
        == "minOffset=0, maxOffset=1, MessageQueue [topic=T, brokerName=broker-b, queueId=0]"
    )
    assert " MessageExt [brokerName=broker-b, queueId=0, " in printed[1]
    status = cli("-c", conf, "--store", root, "topicStatus", "-t", "T").out.splitlines()
    assert status[1].startswith("broker-b ")
    plain = cli("--store", root, "printMsg", "-t", "T").out.splitlines()
    assert (
        plain[0]
        == "minOffset=0, maxOffset=1, MessageQueue [topic=T, brokerName=localStore, queueId=0]"
    )


def test_the_replication_roles_from_options_and_the_file(tmp_path: Path, cli: Cli) -> None:
    """--role, --broker-id, --ha-port and --ha-master (issue #36): each given wins over
    the file's brokerRole, brokerId, haListenPort and haMasterAddress; a slave without an
    id gets 1; a bad address or a slave id of 0 is refused naming what was wrong."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerRole=SYNC_MASTER\nhaListenPort=10950\n")
    ctx = context_from_settings(str(conf), "./store", False, as_json=False, debug=False)
    from_file = _make_options(ctx, _serve_options(conf)).broker
    assert (from_file.broker_role, from_file.broker_id, from_file.ha_listen_port) == (
        "SYNC_MASTER",
        0,
        10950,
    )
    slave = _make_options(
        ctx, _serve_options(conf, role="SLAVE", ha_port=10960, ha_master="10.0.0.5:10912")
    ).broker
    assert (slave.broker_role, slave.broker_id, slave.ha_listen_port) == ("SLAVE", 1, 10960)
    assert slave.ha_master_address == "10.0.0.5:10912"
    second = _make_options(ctx, _serve_options(conf, role="SLAVE", broker_id=2)).broker
    assert second.broker_id == 2
    with pytest.raises(CliError, match="must be > 0, got 0"):
        _make_options(ctx, _serve_options(conf, role="SLAVE", broker_id=0))
    with pytest.raises(CliError, match="--ha-master"):
        _make_options(ctx, _serve_options(conf, role="SLAVE", ha_master="nowhere"))
    refused = cli("--store", tmp_path / "s", "serve", "--brokers", "2", "--role", "SLAVE")
    assert refused.code != 0
    assert "--role, --broker-id and --ha-master are for one broker" in refused.err
    bad = cli("--store", tmp_path / "s", "broker", "--namesrv", "127.0.0.1:1", "--role", "SLAVES")
    assert bad.code == 2 and "--role" in bad.err
