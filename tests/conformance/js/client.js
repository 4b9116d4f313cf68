'use strict';
// A bounded ali-ons 3.12.0 client run by tests/conformance/test_ali_ons.py. Prints one JSON
// object per line on stdout; a hard timer ends the process whatever the broker does.
//
//   node client.js produce NAMESRV TOPIC COUNT [BIG_INDEX] [DELAY_LEVEL]
//   node client.js produce_props NAMESRV TOPIC PROPERTIES_JSON   (one message per object)
//   node client.js consume NAMESRV TOPIC GROUP EXPECT SECONDS [FAIL_KEY]
//   (SUBSCRIBE_SQL92 in the environment subscribes with that SQL92 selector instead of *.)
//   node client.js query NAMESRV TOPIC KEY MSG_ID
//   (ACCESS_KEY and SECRET_KEY in the environment sign every request, as with ACL.)

const { Producer, Consumer, Message } = require('ali-ons');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');
const MessageDecoder = require('ali-ons/lib/message/message_decoder');
const ByteBuffer = require('byte');

const HARD_LIMIT_MS = 90 * 1000;
setTimeout(() => process.exit(3), HARD_LIMIT_MS).unref();

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

function emit(fields) {
  process.stdout.write(JSON.stringify(fields) + '\n');
}

function options(extra) {
  const base = { httpclient: {}, nameSrv: process.argv[3], logger: quiet };
  if (process.env.ACCESS_KEY) {
    base.accessKeyId = process.env.ACCESS_KEY;
    base.accessKeySecret = process.env.SECRET_KEY;
  }
  return Object.assign(base, extra);
}

function describe(msg) {
  return {
    msg_id: msg.msgId,
    topic: msg.topic,
    tags: msg.tags,
    keys: msg.keys,
    body_b64: msg.body ? msg.body.toString('base64') : '',
    queue_id: msg.queueId,
    queue_offset: msg.queueOffset,
    commit_log_offset: msg.commitLogOffset,
    born_host: msg.bornHost,
    store_host: msg.storeHost,
    born_timestamp: msg.bornTimestamp,
    store_timestamp: msg.storeTimestamp,
    reconsume_times: msg.reconsumeTimes,
    sys_flag: msg.sysFlag,
    uniq_key: msg.properties && msg.properties.UNIQ_KEY,
    properties: msg.properties || {},
    origin_id: msg.originMessageId || '',
    retry_topic: msg.retryTopic || '',
  };
}

async function produce() {
  const [, , , namesrv, topic, countText, bigText, delayText] = process.argv;
  const producer = new Producer(options({ producerGroup: 'ons_conformance_producer' }));
  await producer.ready();
  const big = Number(bigText || -1);
  for (let i = 0; i < Number(countText); i++) {
    let body = Buffer.from(`ons-body-${i}`);
    if (i === big) {
      // Above the client's compression threshold (4 KiB): sent zlib-compressed.
      body = Buffer.from(`ons-big-${i}-`.repeat(1000));
    }
    const msg = new Message(topic, `tag${i % 2}`, body);
    msg.keys = [ `ons-key-${i}`, 'ons-shared' ];
    if (Number(delayText || 0) > 0) msg.delayTimeLevel = Number(delayText);
    const result = await producer.send(msg);
    emit({
      event: 'sent',
      i,
      status: result.sendStatus,
      msg_id: result.msgId,
      queue_id: result.messageQueue.queueId,
      broker: result.messageQueue.brokerName,
      queue_offset: result.queueOffset,
      body_b64: body.toString('base64'),
      namesrv,
    });
  }
  await producer.close();
}

async function produceProps() {
  const [, , , , topic, propertiesJson] = process.argv;
  const producer = new Producer(options({ producerGroup: 'ons_conformance_props' }));
  await producer.ready();
  const all = JSON.parse(propertiesJson);
  for (let i = 0; i < all.length; i++) {
    const msg = new Message(topic, 'sql', Buffer.from(`ons-props-${i}`));
    Object.assign(msg.properties, all[i]);
    const result = await producer.send(msg);
    emit({ event: 'sent', i, status: result.sendStatus, msg_id: result.msgId });
  }
  await producer.close();
}

async function consume() {
  const [, , , , topic, group, expectText, secondsText, failKey] = process.argv;
  const consumer = new Consumer(options({
    consumerGroup: group,
    persistConsumerOffsetInterval: 500,
    rebalanceInterval: 1000,
  }));
  const failed = new Set();
  let received = 0;
  let finish;
  const done = new Promise(resolve => { finish = resolve; });
  consumer.on('error', err => emit({ event: 'error', error: String(err && err.message).slice(0, 200) }));
  const sql = process.env.SUBSCRIBE_SQL92;
  const expression = sql ? { expressionType: 'SQL92', subString: sql } : '*';
  consumer.subscribe(topic, expression, async msg => {
    const keys = msg.keys || [];
    // A retried copy has a new msgId; its first id travels in ORIGIN_MESSAGE_ID.
    const identity = msg.originMessageId || msg.msgId;
    const fail = Boolean(failKey) && keys.includes(failKey) && !failed.has(identity);
    emit(Object.assign({ event: 'recv', failing: fail, at: Date.now() }, describe(msg)));
    if (fail) {
      failed.add(identity);
      return Consumer.ACTION_RETRY;
    }
    received += 1;
    if (received >= Number(expectText)) finish();
  });
  await consumer.ready();
  emit({ event: 'started' });
  await Promise.race([ done, new Promise(resolve => setTimeout(resolve, Number(secondsText) * 1000)) ]);
  await new Promise(resolve => setTimeout(resolve, 1000)); // offsets reach the broker
  await consumer.close();
  emit({ event: 'done', received });
}

async function query() {
  const [, , , , topic, key, msgId] = process.argv;
  const producer = new Producer(options({ producerGroup: 'ons_conformance_query' }));
  await producer.ready();
  const client = producer._mqClient;
  const info = MessageDecoder.decodeMessageId(msgId);
  // QUERY_MESSAGE by key, as mqadmin queryMsgByKey does.
  const byKey = RemotingCommand.createRequestCommand(12, {
    topic, key, maxNum: 32, beginTimestamp: 0, endTimestamp: Date.now() + 60000,
  });
  const found = await client.invoke(info.address, byKey, 5000);
  const messages = found.body ? MessageDecoder.decodes(ByteBuffer.wrap(found.body)) : [];
  emit({ event: 'query', code: found.code, messages: messages.map(describe) });
  // VIEW_MESSAGE_BY_ID: the offset taken from the message id.
  const view = RemotingCommand.createRequestCommand(33, { offset: info.offset.toString() });
  const viewed = await client.invoke(info.address, view, 5000);
  const one = viewed.body ? MessageDecoder.decode(ByteBuffer.wrap(viewed.body)) : null;
  emit({ event: 'view', code: viewed.code, message: one ? describe(one) : null });
  await producer.close();
}

const modes = { produce, produce_props: produceProps, consume, query };
modes[process.argv[2]]().then(
  () => process.exit(0),
  err => {
    emit({ event: 'fatal', error: String(err && err.stack).slice(0, 1000) });
    process.exit(2);
  }
);
