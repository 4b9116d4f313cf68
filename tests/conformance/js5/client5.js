'use strict';
// The official RocketMQ 5.x Node.js client (rocketmq-client-nodejs, gRPC) run by
// tests/conformance/test_grpc_nodejs.py. One JSON object per line on stdout; a hard timer
// ends the process whatever the server does.
//
//   node client5.js send ENDPOINT TOPIC COUNT [DELAY_MS] [MESSAGE_GROUP]
//   node client5.js receive ENDPOINT GROUP TOPIC COUNT SECONDS     (SimpleConsumer, acks)
//   node client5.js push ENDPOINT GROUP TOPIC COUNT SECONDS        (PushConsumer)
//   node client5.js idle ENDPOINT GROUP TOPIC SECONDS              (a connected PushConsumer)

const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const HARD_LIMIT_MS = 120 * 1000;
setTimeout(() => process.exit(3), HARD_LIMIT_MS).unref();

const quiet = { info() {}, warn() {}, error() {}, debug() {}, close() {} };

// TLS and an ACL account from the environment: RMQ5_TLS=1 (grpc-js verifies the server
// against GRPC_DEFAULT_SSL_ROOTS_FILE_PATH's CA), RMQ5_ACCESS_KEY / RMQ5_SECRET_KEY.
const security = {
  sslEnabled: process.env.RMQ5_TLS === '1',
  ...(process.env.RMQ5_ACCESS_KEY
    ? { sessionCredentials: { accessKey: process.env.RMQ5_ACCESS_KEY, accessSecret: process.env.RMQ5_SECRET_KEY } }
    : {}),
};

function emit(fields) {
  process.stdout.write(JSON.stringify(fields) + '\n');
}

function view(message) {
  return {
    id: message.messageId,
    topic: message.topic,
    body: message.body.toString(),
    tag: message.tag || null,
    keys: [...message.keys].sort(),
    properties: Object.fromEntries(message.properties),
    attempt: message.deliveryAttempt,
    group: message.messageGroup || null,
    delivery_ms: message.deliveryTimestamp ? message.deliveryTimestamp.getTime() : null,
    received_ms: Date.now(),
  };
}

async function send(endpoint, topic, count, delayMs, group) {
  const producer = new Producer({ ...security, endpoints: endpoint, namespace: '', logger: quiet, topic });
  await producer.startup();
  try {
    for (let i = 0; i < count; i++) {
      const options = {
        topic,
        tag: 'TagJs',
        keys: [`key-${i}`],
        properties: new Map([['lang', 'js'], ['index', String(i)]]),
        body: Buffer.from(`js-body-${i}`),
      };
      let deliverMs = 0;
      if (delayMs > 0) {
        deliverMs = Date.now() + delayMs;
        options.deliveryTimestamp = new Date(deliverMs);
      }
      if (group) options.messageGroup = group;
      try {
        const receipt = await producer.send(options);
        emit({ event: 'sent', index: i, id: receipt.messageId, offset: receipt.offset, deliver_ms: deliverMs });
      } catch (e) {
        emit({ event: 'error', index: i, code: e.code || null, text: String(e.message || e) });
        return;
      }
    }
  } finally {
    await producer.shutdown();
  }
}

async function receive(endpoint, group, topic, count, seconds) {
  const consumer = new SimpleConsumer({
    ...security,
    endpoints: endpoint, namespace: '', logger: quiet, consumerGroup: group,
    subscriptions: new Map([[topic, '*']]), awaitDuration: 5000,
  });
  await consumer.startup();
  let got = 0;
  const deadline = Date.now() + seconds * 1000;
  try {
    while (got < count && Date.now() < deadline) {
      let messages;
      try {
        messages = await consumer.receive(16, 15000);
      } catch (e) {
        emit({ event: 'error', code: e.code || null, text: String(e.message || e) });
        continue;
      }
      for (const message of messages) {
        got++;
        emit({ event: 'received', ...view(message) });
        await consumer.ack(message);
        emit({ event: 'acked', id: message.messageId });
      }
    }
  } finally {
    await consumer.shutdown();
  }
  emit({ event: 'done', received: got });
}

async function push(endpoint, group, topic, count, seconds) {
  let got = 0;
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const consumer = new PushConsumer({
    ...security,
    endpoints: endpoint, namespace: '', logger: quiet, consumerGroup: group,
    subscriptions: new Map([[topic, '*']]),
    messageListener: {
      async consume(message) {
        emit({ event: 'consumed', ...view(message) });
        got++;
        if (got >= count) finish();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  const timer = setTimeout(finish, seconds * 1000);
  await finished;
  clearTimeout(timer);
  await consumer.shutdown();
  emit({ event: 'done', received: got });
}

// A PushConsumer that stays connected, its client id printed: the test asks the broker
// about it as mqadmin would (the client answers a thread stack request with 'mock stack').
async function idle(endpoint, group, topic, seconds) {
  const consumer = new PushConsumer({
    ...security,
    endpoints: endpoint, namespace: '', logger: quiet, consumerGroup: group,
    subscriptions: new Map([[topic, '*']]),
    messageListener: { async consume() { return ConsumeResult.SUCCESS; } },
  });
  await consumer.startup();
  emit({ event: 'started', client_id: consumer.clientId });
  await new Promise(resolve => setTimeout(resolve, seconds * 1000));
  await consumer.shutdown();
  emit({ event: 'done' });
}

async function main() {
  const [action, ...args] = process.argv.slice(2);
  if (action === 'send') {
    await send(args[0], args[1], Number(args[2]), Number(args[3] || 0), args[4] || '');
  } else if (action === 'receive') {
    await receive(args[0], args[1], args[2], Number(args[3]), Number(args[4]));
  } else if (action === 'push') {
    await push(args[0], args[1], args[2], Number(args[3]), Number(args[4]));
  } else if (action === 'idle') {
    await idle(args[0], args[1], args[2], Number(args[3]));
  } else {
    throw new Error(`unknown action ${action}`);
  }
}

main().then(() => process.exit(0), e => {
  emit({ event: 'fatal', text: String(e && e.stack || e) });
  process.exit(1);
});
