"""``rocketstore demo``: write a realistic workload into a store, then query it."""

from __future__ import annotations

import random
import time

import click

from rocketstore.cli.context import CliContext
from rocketstore.config import StoreConfig
from rocketstore.format.message import Message
from rocketstore.format.message_id import encode_uniq_key, month_start_ms, uniq_key_prefix
from rocketstore.store import MessageStore

TOPICS = ("OrderEvents", "Payments", "Shipping")
TAGS = ("created", "paid", "shipped", "cancelled")


@click.command()
@click.option(
    "-n",
    "--messages",
    type=click.IntRange(min=0),
    default=20_000,
    show_default=True,
    help="Messages to write.",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Messages per put_batch call.",
)
@click.pass_obj
def demo(ctx: CliContext, messages: int, batch: int) -> None:
    """Write a workload (3 topics x 4 queues, tags, keys, UNIQ_KEYs) into --store, then
    query it by key, unique key, time and offset and print what was found.

    Example: rocketstore --store ./store demo -n 50000
    """
    rng = random.Random(42)
    # Recovery of an existing store refuses to cut readable records (CliContext.writer_config).
    config = StoreConfig(mapped_file_size_commit_log=64 * 1024 * 1024, cut_damaged_commitlog=False)
    prefix = uniq_key_prefix("127.0.0.1", 4242, 0x5EED)
    with MessageStore.open(ctx.store_dir, config) as store:
        started = time.perf_counter()
        first_ts = None
        written = 0
        counter = 0
        while written < messages:
            topic = TOPICS[rng.randrange(len(TOPICS))]
            queue_id = rng.randrange(4)
            now = time.time_ns() // 1_000_000
            group = []
            for _ in range(min(batch, messages - written)):
                order = rng.randrange(messages // 4 + 1)
                counter += 1
                uniq = encode_uniq_key(prefix, now - month_start_ms(now), counter)
                body = f'{{"order": {order}, "amount": {rng.randrange(1, 10_000)}}}'.encode()
                group.append(
                    Message(
                        topic,
                        body,
                        queue_id=queue_id,
                        properties={
                            "KEYS": f"order-{order}",
                            "UNIQ_KEY": uniq,
                            "TAGS": TAGS[order % len(TAGS)],
                        },
                    )
                )
            results = store.put_batch(group)
            refused = next((r for r in results if not r.ok), None)
            if refused is not None:
                raise click.ClickException(
                    f"the store refused the demo's messages: {refused.status.name} "
                    f"{refused.reason}".rstrip()
                )
            if first_ts is None:
                first_ts = results[0].store_timestamp
            written += len(group)
        store.wait_dispatched()
        elapsed = time.perf_counter() - started
        click.echo(f"wrote {written} messages in {elapsed:.2f}s ({written / elapsed:,.0f} msg/s)")
        click.echo(f"topics: {store.topics()}")
        click.echo(f"CommitLog: {store.min_commit_log_offset()}..{store.max_commit_log_offset()}")
        key = "order-7"
        hits = store.query_messages("OrderEvents", key, max_count=5)
        click.echo(f"query by key {key!r} in OrderEvents: {len(hits)} found")
        for m in hits:
            click.echo(f"  {m.msg_id} q{m.queue_id}@{m.queue_offset} tags={m.tags} {m.body!r}")
        if hits:
            uniq = hits[0].uniq_key or ""
            by_uniq = store.query_by_unique_key("OrderEvents", uniq)
            click.echo(f"query by unique key {uniq}: {len(by_uniq)} found")
            viewed = store.view_message(hits[0].msg_id)
            click.echo(f"view by msgId {hits[0].msg_id}: {viewed.body if viewed else None!r}")
        assert first_ts is not None
        offset = store.offset_by_time("Payments", 0, first_ts + 1)
        click.echo(f"Payments-0 first offset stored at/after {first_ts + 1}: {offset}")
        got = store.get_messages("demo", "Payments", 0, 0, max_count=3, tags="paid || shipped")
        click.echo(
            f"get_messages Payments-0 from 0 (tags paid||shipped): {got.status.name}, "
            f"{len(got.messages)} messages, next offset {got.next_begin_offset}"
        )
