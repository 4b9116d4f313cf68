"""Arguments and files no command can use get one line naming what is wrong (exit 2 for
an option, 1 for a file or the store), never a traceback, a hang or a store in the wrong
place: numbers past Java's int and long, charsets that are no charsets, an empty
--store, FIFOs and devices where a file is expected, non-UTF-8 arguments, queue ids a
broker would refuse, absurd topic configs and JSON nested past any real file."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.perm_name import PERM_READ
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from tests.cli.cli_helpers import CLI, Run, commitlog_file, flip_byte, uniq_of

Cli = Callable[..., Run]
PAST_LONG = "99999999999999999999"
UNIQ = uniq_of(0)
SMALL_INDEX = StoreConfig(max_hash_slot_num=4, max_index_num=4)  # three entries a file


def _usage_error(run: Run, option: str) -> None:
    assert run.code == 2, run
    assert "Traceback" not in run.err
    assert option in run.err, run.err


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("queryMsgByKey", "-t", "Payments", "-k", "k", "-b", PAST_LONG), "-b"),
        (("queryMsgByKey", "-t", "Payments", "-k", "k", "-e", "-" + PAST_LONG), "-e"),
        (("queryMsgByKey", "-t", "Payments", "-k", "k", "-m", PAST_LONG), "-m"),
        (("queryMsgByKey", "-t", "Payments", "-k", "k", "-m", "2147483648"), "-m"),
        (("queryMsgTraceById", "-i", "x", "-c", PAST_LONG), "-c"),
        (("queryMsgTraceById", "-i", "x", "-b", PAST_LONG), "-b"),
        (("queryMsgByOffset", "-t", "Payments", "-b", "x", "-i", "0", "-o", PAST_LONG), "-o"),
        (("queryMsgByOffset", "-t", "Payments", "-b", "x", "-i", PAST_LONG, "-o", "0"), "-i"),
        (("printMsgByQueue", "-t", "Payments", "-i", "2147483648"), "-i"),
        (("consumeMessage", "-t", "Payments", "-c", PAST_LONG), "-c"),
        (("consumeMessage", "-t", "Payments", "-b", "x", "-i", "0", "-o", PAST_LONG), "-o"),
        (("queryCq", "-t", "Payments", "-q", "0", "-i", PAST_LONG), "-i"),
        (("queryCq", "-t", "Payments", "-q", PAST_LONG), "-q"),
        (("dump", "--from", PAST_LONG), "--from"),
        (("printMsg", "-t", "Payments", "-b", PAST_LONG), "-b"),
        (("consumerProgress", "-g", "G", "-t", "Payments"), None),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v),
)
def test_numbers_past_java_types_are_usage_errors(
    store: Path, cli: Cli, args: tuple[str, ...], option: str | None
) -> None:
    run = cli("--store", store, *args)
    if option is None:  # the control: a valid command of the same kind
        assert run.code == 0, run
        return
    _usage_error(run, option)
    assert "Java long" in run.err or "is not in the range" in run.err


def test_the_largest_java_long_is_still_taken(store: Path, cli: Cli) -> None:
    """The bound is Java's, not one of ours: 2^63-1 is a valid (empty) query."""
    top = str(2**63 - 1)
    run = cli("--store", store, "queryMsgByKey", "-t", "Payments", "-k", "order-0", "-e", top)
    assert run.code == 0 and "order-0" not in run.err
    beyond = cli("--store", store, "queryMsgByOffset", "-t", "Payments", "-b", "x", "-i", "0")
    assert beyond.code == 2  # -o is required (a control for the parametrised runs)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("printMsg", "-t", "Payments", "-c", "nonexistent"), "unknown charset 'nonexistent'"),
        (("printMsg", "-t", "Payments", "-c", "hex"),
         "'hex' is not a charset (Python's hex codec transforms data)"),
        (("printMsgByQueue", "-t", "Payments", "-i", "0", "-c", "rot13"), "not a charset"),
        (("queryMsgByOffset", "-t", "Payments", "-b", "x", "-i", "0", "-o", "0", "-f", "idna"),
         "cannot print arbitrary bytes"),
        (("queryMsgByUniqueKey", "-t", "Payments", "-i", UNIQ, "-f", "punycode"),
         "cannot print arbitrary bytes"),
        (("queryMsgByUniqueKey", "-t", "Payments", "-i", UNIQ, "-f", "base64"), "not a charset"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else v,
)  # fmt: skip
def test_charsets_that_cannot_print_bodies_are_refused(
    store: Path, cli: Cli, args: tuple[str, ...], why: str
) -> None:
    run = cli("--store", store, *args)
    _usage_error(run, args[args.index("-c" if "-c" in args else "-f")])
    assert why in run.err


@pytest.mark.parametrize("charset", ["GBK", "ISO-8859-1", "UTF-16", "utf_8", "latin1"])
def test_java_charset_names_print_bodies(store: Path, cli: Cli, charset: str) -> None:
    run = cli(
        "--store", store, "printMsgByQueue", "-t", "Payments", "-i", "0", "-p", "true", "-d",
        "true", "-c", charset,
    )  # fmt: skip
    assert run.code == 0, run.err
    assert run.out.count("MessageExt [") == 75


def test_an_empty_store_path_is_refused_before_anything_is_written(
    cli: Cli, tmp_path: Path
) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    done = subprocess.run(
        [*CLI, "--store", "", "sendMessage", "-t", "T", "-p", "x"],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "'--store': must name a directory, got an empty path" in done.stderr
    assert list(here.iterdir()) == []


def test_settings_files_must_be_regular_files(store: Path, cli: Cli, tmp_path: Path) -> None:
    fifo = tmp_path / "broker.conf"
    os.mkfifo(fifo)  # nobody writes it: opening it blocking would hang
    for path, what in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file")):
        run = cli("-c", path, "--store", store, "topicList")
        assert (run.code, run.out) == (1, "")
        assert run.err == f"rocketstore: error: settings file {path} is {what}\n"
    directory = cli("-c", tmp_path, "--store", store, "topicList")
    assert directory.err == f"rocketstore: error: settings file {tmp_path} is a directory\n"


def test_dump_compaction_log_refuses_a_fifo(cli: Cli, tmp_path: Path) -> None:
    fifo = tmp_path / "00000000000000000000"
    os.mkfifo(fifo)
    run = cli("dumpCompactionLog", "-f", fifo)
    assert (run.code, run.err) == (1, f"rocketstore: error: file {fifo} is not a regular file\n")


def _send(store: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """sendMessage with arguments as bytes (a shell passes what it was given)."""
    command = [os.fsencode(a) if isinstance(a, str) else a for a in (*CLI, "--store", str(store))]
    return subprocess.run(
        [*command, b"sendMessage", *(os.fsencode(a) if isinstance(a, str) else a for a in args)],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )


def test_send_message_keeps_a_non_utf8_body_byte_for_byte(store: Path, cli: Cli) -> None:
    sent = _send(store, "-t", "Raw", "-p", b"\xff\xfe caf\xe9")
    assert sent.returncode == 0, sent.stderr
    found = cli("--store", store, "--json", "printMsg", "-t", "Raw", "-d", "true")
    bodies = [line["body"] for line in found.json_lines() if "body" in line]
    assert [base64.b64decode(b) for b in bodies] == [b"\xff\xfe caf\xe9"]


@pytest.mark.parametrize("flag", ["-k", "-c"])
def test_send_message_refuses_non_utf8_keys_and_tags(store: Path, flag: str) -> None:
    before = sorted(p.name for p in (store / "commitlog").iterdir())
    sent = _send(store, "-t", "Raw", "-p", "x", flag, b"k\xff")
    assert sent.returncode == 1
    assert sent.stderr.decode() == (
        f"rocketstore: error: {flag} 'k\\udcff' is not valid UTF-8 text (properties are UTF-8)\n"
    )
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == before


def test_send_message_queue_ids_a_broker_accepts(store: Path, cli: Cli) -> None:
    """Payments has queues 0-3 and no topics.json entry; a new topic gets 4 queues; a
    configured one takes ids below its larger queue count."""
    too_far = cli("--store", store, "sendMessage", "-t", "Payments", "-p", "x", "-i", "2147483647")
    assert too_far.code == 1
    assert too_far.err == (
        "rocketstore: error: queue id 2147483647 is illegal: topic Payments has 4 queues in "
        "the store\n"
    )
    new = cli("--store", store, "sendMessage", "-t", "Fresh", "-p", "x", "-i", "4")
    assert (
        new.err
        == "rocketstore: error: queue id 4 is illegal: topic Fresh is new and gets 4 queues\n"
    )
    assert cli("--store", store, "sendMessage", "-t", "Fresh", "-p", "x", "-i", "3").code == 0
    TopicConfigManager(store).update(TopicConfig("Wide", read_queue_nums=2, write_queue_nums=6))
    assert cli("--store", store, "sendMessage", "-t", "Wide", "-p", "x", "-i", "5").code == 0
    wide = cli("--store", store, "sendMessage", "-t", "Wide", "-p", "x", "-i", "6")
    assert wide.err == (
        "rocketstore: error: queue id 6 is illegal: topic Wide has 6 queues in config/topics.json\n"
    )
    TopicConfigManager(store).update(TopicConfig("ReadOnly", perm=PERM_READ))
    read_only = cli("--store", store, "sendMessage", "-t", "ReadOnly", "-p", "x")
    assert read_only.err == "rocketstore: error: topic ReadOnly is not writeable (perm 4)\n"
    listed = cli("--store", store, "--json", "topicList").json_lines()
    queues = {row["topic"]: row["queueIds"] for row in listed}
    assert queues["Payments"] == [0, 1, 2, 3] and queues["Fresh"] == [3]
    assert queues["Wide"] == [5] and queues["ReadOnly"] == []


def test_send_message_follows_the_brokers_topic_creation_settings(
    store: Path, tmp_path: Path, cli: Cli
) -> None:
    """A new topic gets the producer's 4 queues or the broker's defaultTopicQueueNums if
    fewer; with autoCreateTopicEnable=false only topics the store or topics.json knows."""
    conf = tmp_path / "broker.conf"
    conf.write_text("defaultTopicQueueNums=2\n")
    few = cli("-c", conf, "--store", store, "sendMessage", "-t", "Few", "-p", "x", "-i", "2")
    assert (
        few.err == "rocketstore: error: queue id 2 is illegal: topic Few is new and gets 2 queues\n"
    )
    assert (
        cli("-c", conf, "--store", store, "sendMessage", "-t", "Few", "-p", "x", "-i", "1").code
        == 0
    )
    conf.write_text("autoCreateTopicEnable=false\n")
    unknown = cli("-c", conf, "--store", store, "sendMessage", "-t", "Nowhere", "-p", "x")
    assert unknown.err == (
        "rocketstore: error: No route info of this topic: Nowhere (autoCreateTopicEnable=false)\n"
    )
    assert cli("-c", conf, "--store", store, "sendMessage", "-t", "Payments", "-p", "x").code == 0
    TopicConfigManager(store).update(TopicConfig("Made", read_queue_nums=1, write_queue_nums=1))
    assert cli("-c", conf, "--store", store, "sendMessage", "-t", "Made", "-p", "x").code == 0
    conf.write_text("defaultTopicQueueNums=0\n")
    bad = cli("-c", conf, "--store", store, "sendMessage", "-t", "Few", "-p", "x")
    assert bad.code == 1 and "default_topic_queue_nums must be 1..1024, got 0" in bad.err


def test_an_absurd_read_queue_count_is_named_not_listed(store: Path, cli: Cli) -> None:
    TopicConfigManager(store).update(
        TopicConfig("Payments", read_queue_nums=2147483647, write_queue_nums=4)
    )
    run = cli("--store", store, "consumerProgress", "-g", "G", "-t", "Payments")
    assert (run.code, run.out) == (1, "")
    assert run.err == (
        "rocketstore: error: topic Payments: readQueueNums 2147483647 in config/topics.json "
        "is more than the 65535 queues the offline tools list; correct it with updateTopic -r\n"
    )
    fixed = cli("--store", store, "updateTopic", "-t", "Payments", "-r", "4", "-w", "4")
    assert fixed.code == 0, fixed.err
    assert cli("--store", store, "consumerProgress", "-g", "G", "-t", "Payments").code == 0


def test_json_nested_past_any_real_file_is_a_bad_file(store: Path, cli: Cli) -> None:
    config = store / "config"
    config.mkdir(exist_ok=True)
    depth = sys.getrecursionlimit() * 20
    (config / "topics.json").write_text(
        json.dumps({"x": 0})[:-1] + ', "topicConfigTable": ' + "[" * depth + "]" * depth + "}"
    )
    run = cli("--store", store, "topicList")
    assert (run.code, run.out) == (1, "")
    assert "Traceback" not in run.err and "internal error" not in run.err
    assert "topic config file is unusable (not valid JSON: JSON nested too deeply)" in run.err


def test_send_message_says_when_its_message_could_not_be_indexed(tmp_path: Path, cli: Cli) -> None:
    """The message is acknowledged (in the CommitLog, SEND_OK printed); that its index
    entry could not be written is the command's error, one line, no traceback."""
    root = tmp_path / "store"
    with MessageStore.open(root, SMALL_INDEX) as store:
        for n in range(3):
            assert store.put(Message("T", b"m", properties={"KEYS": f"k{n}"})).ok
    index = root / "index"
    (full,) = index.iterdir()
    full.rename(index / "99991231235959999")
    run = cli("--store", root, "sendMessage", "-t", "T", "-p", "x", "-k", "k3")
    assert run.code == 1
    assert "SEND_OK" in run.out
    assert "Traceback" not in run.err
    assert run.err.splitlines()[-1] == (
        "rocketstore: error: the message is stored in the CommitLog, but the store could not "
        f"queue or index it: index file 99991231235959999 in {index} is named for no time a "
        "new file can follow; move it away (rocketstore rebuild makes the index again)"
    )
    (index / "99991231235959999").unlink()
    unindexed = cli("--store", root, "--json", "queryMsgByKey", "-t", "T", "-k", "k3")
    assert (unindexed.code, unindexed.out) == (1, "")  # until a writer recovers
    assert "query message by key finished, but no message." in unindexed.err
    assert cli("--store", root, "sendMessage", "-t", "T", "-p", "y").code == 0
    again = cli("--store", root, "--json", "queryMsgByKey", "-t", "T", "-k", "k3")
    assert [row["keys"] for row in again.json_lines()] == ["k3"]


def test_send_message_refuses_to_cut_records_after_damage(store: Path, cli: Cli) -> None:
    """RocketMQ's recovery would cut the CommitLog at a damaged record and lose the valid
    ones after it; the CLI's writers refuse and leave the files to check, dump and
    `check --repair --force`."""
    scanned = cli("--store", store, "--json", "dump").json_lines()
    victim = scanned[len(scanned) - 40]  # in the last files recovery scans
    following = scanned[len(scanned) - 39]["commitLogOffset"]
    offset = victim["commitLogOffset"]
    flip_byte(commitlog_file(store, offset), offset % (64 * 1024) + 100)  # in the body
    before = {p.name: p.read_bytes() for p in (store / "commitlog").iterdir()}
    run = cli("--store", store, "sendMessage", "-t", "Payments", "-p", "x")
    assert (run.code, run.out) == (1, "")
    assert run.err.startswith(
        f"rocketstore: error: the CommitLog is damaged at offset {offset} (body CRC mismatch"
    )
    assert f"a readable record follows at offset {following}:" in run.err
    assert {p.name: p.read_bytes() for p in (store / "commitlog").iterdir()} == before
    forced = cli("--store", store, "check", "--repair", "--force")
    assert forced.code == 0, forced.err
    assert cli("--store", store, "sendMessage", "-t", "Payments", "-p", "x").code == 0


def test_rebuild_and_repair_refuse_to_cut_readable_records(store: Path, cli: Cli) -> None:
    """A damaged magic with readable records after it in the same file: rebuild and
    repair (without --force) refuse instead of cutting them; nothing is changed."""
    scanned = cli("--store", store, "--json", "dump").json_lines()
    offset = scanned[len(scanned) - 40]["commitLogOffset"]
    flip_byte(commitlog_file(store, offset), offset % (64 * 1024) + 5)  # the magic
    before = {p.name: p.read_bytes() for p in (store / "commitlog").iterdir()}
    queues = sorted(p.name for p in (store / "consumequeue").iterdir())
    run = cli("--store", store, "rebuild")
    assert run.code == 1
    assert f"corrupt CommitLog data at offset {offset} (illegal magic code" in run.err
    assert "is followed by readable records; a rebuild would cut them" in run.err
    repair = cli("--store", store, "check", "--repair")
    assert repair.code == 1
    assert "followed by readable records; repair would lose them" in repair.err
    assert {p.name: p.read_bytes() for p in (store / "commitlog").iterdir()} == before
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == queues


def test_send_message_refuses_system_topics_and_separators(store: Path, cli: Cli) -> None:
    for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"):
        run = cli("--store", store, "sendMessage", "-t", topic, "-p", "x")
        assert run.err == f"rocketstore: error: Sending message to topic[{topic}] is forbidden.\n"
    bad_key = cli("--store", store, "sendMessage", "-t", "T", "-p", "x", "-k", "k\x02KEYS\x01z")
    assert bad_key.code == 1 and "holds a control character 0x01 or 0x02" in bad_key.err
    none_chosen = cli("--store", store, "--json", "sendMessage", "-t", "T", "-p", "x", "-i", "-1")
    assert none_chosen.code == 0, none_chosen.err
    assert none_chosen.json_lines()[0]["queueId"] in range(4)  # the producer's pick
    assert cli("--store", store, "sendMessage", "-t", "T", "-p", "x", "-i", "-2").code == 2


def _serve(store: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--store", str(store), "serve", "--listen", "127.0.0.1:0",
         "--namesrv-listen", "127.0.0.1:0", *map(str, extra)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_serve_refuses_bad_options_before_opening_the_store(store: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "acl.yml"
    os.mkfifo(fifo)
    acl = _serve(store, "--acl", fifo)
    assert acl.returncode == 1
    assert f"ACL file {fifo} is not a regular file" in acl.stderr
    assert not (store / "abort").exists()  # the store was never opened
    port = _serve(store, "--listen", "127.0.0.1:70000")
    assert port.returncode == 1 and "port 70000 is past 65535" in port.stderr
    persist = _serve(store, "--offset-persist-ms", "1" + "0" * 40)
    assert persist.returncode == 2 and "--offset-persist-ms" in persist.stderr
    empty = _serve(store, "--store", "")
    assert empty.returncode == 2 and "must name a directory" in empty.stderr


def test_a_lost_page_before_records_is_not_cut_silently(store: Path, cli: Cli) -> None:
    """Zeros (a page that never reached the disk) with whole records after them in the
    same file: writers and repair refuse; `check --repair --force` cuts."""
    scanned = cli("--store", store, "--json", "dump").json_lines()
    offset = scanned[len(scanned) - 30]["commitLogOffset"]
    path = commitlog_file(store, offset)
    data = bytearray(path.read_bytes())
    at = offset % (64 * 1024)
    data[at : at + 600] = bytes(600)
    path.write_bytes(bytes(data))
    send = cli("--store", store, "sendMessage", "-t", "T", "-p", "x")
    assert send.code == 1
    assert f"damaged at offset {offset} (zeros where the data should go on)" in send.err
    repair = cli("--store", store, "check", "--repair")
    assert repair.code == 1 and "repair would lose them" in repair.err
    forced = cli("--store", store, "check", "--repair", "--force")
    assert forced.code == 0, forced.err
    assert cli("--store", store, "sendMessage", "-t", "T", "-p", "x").code == 0


def test_repair_cuts_a_last_record_with_a_bad_crc_as_a_torn_write(store: Path, cli: Cli) -> None:
    """Nothing follows it: recovery would drop it as a torn write, and repair does."""
    scanned = cli("--store", store, "--json", "dump").json_lines()
    last = scanned[-1]
    offset = last["commitLogOffset"]
    flip_byte(commitlog_file(store, offset), offset % (64 * 1024) + 90)  # in the body
    repair = cli("--store", store, "check", "--repair")
    assert repair.code == 0, repair.out + repair.err
    assert f"cut the CommitLog at offset {offset}" in repair.out
    assert cli("--store", store, "check").code == 0


def test_send_message_refuses_an_empty_body_and_escape_codecs(store: Path, cli: Cli) -> None:
    empty = cli("--store", store, "sendMessage", "-t", "T", "-p", "")
    assert (empty.code, empty.err) == (
        1,
        "rocketstore: error: -p: the message body length is zero\n",
    )
    escape = cli("--store", store, "printMsg", "-t", "Payments", "-c", "unicode_escape")
    assert escape.code == 2 and "reads escape sequences" in escape.err
