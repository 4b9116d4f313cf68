"""The gRPC endpoint RocketMQ 5.x clients speak (apache.rocketmq.v2.MessagingService),
served beside the remoting port on the broker's event loop (grpc.aio).

Layer: broker. Needs the ``grpc`` extra; nothing outside this package imports it unless
``--grpc-listen`` is given. docs/broker.md "5.x clients (gRPC)" says what it serves.
"""
