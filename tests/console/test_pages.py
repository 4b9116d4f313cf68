"""Every page of the offline console over HTTP: what each shows for the store of
console_helpers (tests/cli's 900 messages, a DLQ, a group's offsets), and the searches."""

from __future__ import annotations

import html
import re
import subprocess
import urllib.request
from pathlib import Path

from rocketstore import MessageStore
from rocketstore.format.message_id import offset_msg_id
from tests.cli.cli_helpers import BASE_MS, CONFIG, body_of, uniq_of
from tests.console.console_helpers import DLQ, GROUP, get


def rows(page: str, table_id: str) -> list[list[str]]:
    """The cells' text of each row of the table with ``table_id``, header row left out."""
    table = re.search(rf'<table id="{re.escape(table_id)}">(.*?)</table>', page, re.S)
    assert table is not None, f"no table {table_id}"
    found = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        if cells:
            found.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return found


def shown_body(page: str) -> str:
    found = re.search(r'<pre id="body">(.*?)</pre>', page, re.S)
    assert found is not None
    return html.unescape(found.group(1))


def commit_log_offset(root: Path, i: int) -> int:
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        (message,) = store.query_by_unique_key("OrderEvents", uniq_of(i))
        return message.commit_log_offset


def test_overview_counts_the_topics_messages_and_groups(console_url):
    page = get(console_url, "/")
    assert page.status == 200
    assert "offline store" in page.text
    # 900 messages in Payments and OrderEvents, 2 in the DLQ; one group
    assert re.search(r"Messages in queues</div><div class=\"value\">902<", page.text)
    assert re.search(r"Consumer groups</div><div class=\"value\">1<", page.text)
    assert "/topic?name=Payments" in page.text and "/topic?name=OrderEvents" in page.text


def test_topics_lists_every_topic_with_its_message_count(console_url):
    found = {r[0]: r for r in rows(get(console_url, "/topics").text, "topics")}
    assert found["Payments"][1] == "normal" and found["Payments"][3] == "300"
    assert found["OrderEvents"][3] == "600"
    assert found[DLQ][1] == "dlq" and found[DLQ][3] == "2"


def test_topic_page_shows_each_queue_min_max_and_last_update(console_url):
    queues = rows(get(console_url, "/topic", name="OrderEvents").text, "queues")
    assert [r[0] for r in queues] == ["0", "1", "2", "3"]
    assert sum(int(r[3]) for r in queues) == 600
    for row in queues:
        assert row[1] == "0" and int(row[2]) == int(row[3]) and row[4].startswith("2023-11-1")


def test_unknown_topic_is_not_found(console_url):
    assert get(console_url, "/topic", name="NoSuchTopic").status == 404


def test_group_lag_per_queue(console_url, console_store):
    _root, ends = console_store
    page = get(console_url, "/group", name=GROUP)
    lag = {(r[0], r[1]): r for r in rows(page.text, "lag")}
    assert lag[("OrderEvents", "0")][2:5] == [str(ends[0]), "10", str(ends[0] - 10)]
    assert lag[("OrderEvents", "1")][2:5] == [str(ends[1]), str(ends[1]), "0"]
    assert lag[("OrderEvents", "2")][2:5] == [str(ends[2]), "0", str(ends[2])]
    assert lag[("OrderEvents", "3")][2:5] == [str(ends[3]), "-", str(ends[3])]
    total = ends[0] - 10 + ends[2] + ends[3]
    assert f'id="total-lag">{total:,}<' in page.text
    # the last consumed message of queue 0 is its tenth (queue offset 9): message 37
    assert lag[("OrderEvents", "0")][5].startswith("2023-11-14")
    groups = {r[0]: r for r in rows(get(console_url, "/groups").text, "groups")}
    assert groups[GROUP][2] == f"{total:,}" and groups[GROUP][3] == "offline"


def test_search_by_key_finds_the_message(console_url):
    page = get(console_url, "/search", by="key", topic="OrderEvents", key="order-5")
    found = rows(page.text, "messages") if 'id="messages"' in page.text else None
    assert "1 message(s)" in page.text, page.text
    assert uniq_of(5) in page.text
    assert found is None or len(found) == 1


def test_search_by_key_within_a_time_range(console_url):
    # cust-3: every 7th message; the range holds i = 10..40 (store times BASE + i s)
    page = get(
        console_url, "/search", by="key", topic="OrderEvents", key="cust-3",
        begin=BASE_MS + 10_000, end=BASE_MS + 40_000,
    )  # fmt: skip
    expected = [i for i in range(10, 41) if i % 7 == 3 and i % 3 != 0]
    assert f"{len(expected)} message(s)" in page.text
    for i in expected:
        assert uniq_of(i) in page.text


def test_search_by_unique_key_with_and_without_topic(console_url):
    for topic in ("OrderEvents", ""):
        page = get(console_url, "/search", by="uniq", topic=topic, key=uniq_of(7))
        assert "1 message(s)" in page.text and uniq_of(7) in page.text


def test_search_by_message_id(console_url, console_store):
    root, _ = console_store
    offset = commit_log_offset(root, 8)
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        message = store.look_message(offset)
        assert message is not None
        msg_id = offset_msg_id(message.store_host, offset)
    page = get(console_url, "/search", by="id", key=msg_id)
    assert "1 message(s)" in page.text and uniq_of(8) in page.text
    # the client's msgId (UNIQ_KEY) is taken too
    page = get(console_url, "/search", by="id", key=uniq_of(8))
    assert "1 message(s)" in page.text
    page = get(console_url, "/search", by="id", key="7F000001000027110000000FFFFFFFFF")
    assert "0 message(s)" in page.text and "no message has this" in page.text


def test_search_by_time_range(console_url):
    page = get(
        console_url, "/search", by="time", topic="Payments",
        begin=BASE_MS + 30_000, end=BASE_MS + 59_999,
    )  # fmt: skip
    expected = [i for i in range(30, 60) if i % 3 == 0]
    assert f"{len(expected)} message(s)" in page.text
    assert all(uniq_of(i) in page.text for i in expected)
    assert uniq_of(60) not in page.text and uniq_of(27) not in page.text


def test_search_by_time_takes_datetime_local_text(console_url):
    page = get(console_url, "/search", by="time", topic="Payments", begin="2000-01-01T00:00")
    assert "50 message(s)" in page.text and "narrow the time range" in page.text


def test_search_by_queue_offset(console_url):
    page = get(console_url, "/search", by="offset", topic="Payments", queue=0, offset=5)
    # Payments queue 0: i % 3 == 0 and i % 4 == 0, i = 0, 12, 24...: offset 5 is i = 60
    assert uniq_of(60) in page.text and uniq_of(48) not in page.text
    page = get(console_url, "/search", by="offset", topic="Payments", queue=0, offset=10**6)
    assert "no message at Payments-0 offset 1000000" in page.text


def test_search_needs_a_topic_for_key_and_time(console_url):
    page = get(console_url, "/search", by="key", key="order-5")
    assert "a topic is needed" in page.text


def test_bad_numbers_and_times_are_400(console_url):
    assert get(console_url, "/search", by="offset", topic="Payments", offset="x").status == 400
    assert get(console_url, "/search", by="time", topic="Payments", begin="soon").status == 400
    assert get(console_url, "/message", offset="abc").status == 400


def test_message_page_shows_properties_body_and_consume_track(console_url, console_store):
    root, _ = console_store
    # message 5: OrderEvents queue 1 (consumed: the group is at the queue's end)
    page = get(console_url, "/message", offset=commit_log_offset(root, 5))
    assert page.status == 200
    properties = {r[0]: r[1] for r in rows(page.text, "properties")}
    assert properties["KEYS"] == "order-5 cust-5" and properties["TAGS"] == "shipped"
    assert shown_body(page.text) == body_of(5).decode()
    assert rows(page.text, "tracks") == [
        [GROUP, "CONSUMED", str(_end(console_store, 1)), "offline"]
    ]
    json_view = get(console_url, "/message", offset=commit_log_offset(root, 5), view="json")
    assert shown_body(json_view.text) == '{\n  "order": 5\n}'
    hex_view = get(console_url, "/message", offset=commit_log_offset(root, 5), view="hex")
    assert shown_body(hex_view.text).startswith("00000000  7b 22 6f 72 64 65 72 22")
    # message 2: queue 2, where the group committed 0: not consumed yet
    page = get(console_url, "/message", offset=commit_log_offset(root, 2))
    assert rows(page.text, "tracks")[0][:3] == [GROUP, "NOT_CONSUME_YET", "0"]
    # message 1: a body that is not one JSON document
    page = get(console_url, "/message", offset=commit_log_offset(root, 1), view="json")
    assert shown_body(page.text) == "(not a JSON document)"


def _end(console_store, queue_id):
    return console_store[1][queue_id]


def test_message_not_found(console_url):
    assert get(console_url, "/message", offset=10**9).status == 404


def test_dlq_lists_its_topics_and_their_messages(console_url):
    page = get(console_url, "/dlq")
    assert rows(page.text, "dlq-topics") == [[DLQ, GROUP, "2", rows(page.text, "dlq-topics")[0][3]]]
    listed = get(console_url, "/dlq", topic=DLQ)
    assert "dead-0" in listed.text and "dead-1" in listed.text


def test_charts_draw_the_stored_rate(console_url):
    page = get(console_url, "/charts")
    assert page.status == 200 and "<svg" in page.text and "<polyline" in page.text
    assert "stored" in page.text


def test_health_runs_the_check_on_request(console_url):
    page = get(console_url, "/health")
    assert "Run check" in page.text  # (the result of an earlier run stays shown)
    page = get(console_url, "/health", check=1)
    assert re.search(r'id="verdict">OK<', page.text), page.text
    assert "902 records" in page.text


def test_actions_are_refused_offline(console_url):
    answer = get(console_url, "/action/create-topic", data={"topic": "New"})
    assert answer.status == 403 and "read-only" in answer.text
    assert get(console_url, "/action/create-topic").status == 405


def test_static_and_unknown_paths(console_url):
    css = get(console_url, "/static/console.css")
    assert css.status == 200 and css.headers["Content-Type"] == "text/css"
    assert get(console_url, "/nothing").status == 404


def test_an_offline_console_sees_what_a_writer_appends(tmp_path):
    from rocketstore import Message
    from rocketstore.console import ConsoleServer, OfflineSource

    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as writer:
        assert writer.put(Message("Live", b"one")).status.ok
        writer.wait_dispatched()
        source = OfflineSource(str(root), CONFIG)
        server = ConsoleServer(source, "127.0.0.1:0")
        server.start()
        try:
            url = f"http://{server.address}"
            assert rows(get(url, "/topic", name="Live").text, "queues")[0][2] == "1"
            for _ in range(4):
                assert writer.put(Message("Live", b"more")).status.ok
            writer.wait_dispatched()
            assert rows(get(url, "/topic", name="Live").text, "queues")[0][2] == "5"
            page = get(url, "/search", by="offset", topic="Live", queue=0, offset=4)
            assert "1 message(s)" in page.text
        finally:
            server.stop()
            source.close()


def test_head_gives_the_headers_without_the_body(console_url):
    request = urllib.request.Request(console_url + "/topics", method="HEAD")
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200 and int(answer.headers["Content-Length"]) > 1000
        assert answer.read() == b""


def _console_process(store: Path, *, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """``rocketstore --store STORE console`` on a free loopback port, its pipes text;
    ``sigint_ignored``: started as a shell's background job is, SIGINT ignored."""
    from tests.cli.cli_helpers import CLI

    command = [*CLI, "--store", str(store), "console", "--listen", "127.0.0.1:0"]
    if sigint_ignored:  # (the shell's `trap '' INT` is inherited through exec)
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )  # fmt: skip


def test_the_console_command_serves_until_interrupted(console_store):
    import signal
    import time

    process = _console_process(console_store[0])
    assert process.stderr is not None
    try:
        line = process.stderr.readline()
        found = re.search(r"console at (http://127\.0\.0\.1:\d+)/ over .* \(read-only", line)
        assert found, line
        page = get(found.group(1), "/topics")
        assert page.status == 200 and "OrderEvents" in page.text
    finally:
        process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        process.communicate(timeout=30)
    assert process.returncode == 0


def test_the_console_command_stops_on_a_sigint_another_thread_takes(console_store):
    """The kernel hands a process's SIGINT to any of its threads: one taken by the
    server's thread must stop the console too (a main thread waiting without a timeout
    was never woken; CI saw it ignore Ctrl-C)."""
    import ctypes
    import os
    import platform
    import signal

    import pytest

    if platform.machine() != "x86_64" or not os.path.isdir("/proc/self/task"):
        pytest.skip("tgkill's number is x86-64 Linux's")

    process = _console_process(console_store[0])
    assert process.stderr is not None
    try:
        assert "console at" in process.stderr.readline()
        others = [int(t) for t in os.listdir(f"/proc/{process.pid}/task") if int(t) != process.pid]
        assert others  # the server's thread at least
        libc = ctypes.CDLL(None, use_errno=True)
        tgkill = 234  # x86-64's tgkill: a signal to one thread of a process
        assert libc.syscall(tgkill, process.pid, others[0], signal.SIGINT) == 0
        process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0


def test_the_console_command_stops_on_sigint_inherited_ignored_and_on_sigterm(console_store):
    """Started with SIGINT ignored (what a shell's background job inherits), SIGINT still
    stops it; so does SIGTERM."""
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):
        process = _console_process(console_store[0], sigint_ignored=True)
        assert process.stderr is not None
        try:
            assert "console at" in process.stderr.readline()
            process.send_signal(signum)
            process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 0, signum


def test_the_console_command_needs_a_store(tmp_path):
    from tests.cli.cli_helpers import run_cli

    run = run_cli("--store", tmp_path / "nothing", "console")
    assert run.code == 1 and "does not exist" in run.err
