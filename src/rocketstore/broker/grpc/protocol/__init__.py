"""RocketMQ 5's gRPC protocol (apache.rocketmq.v2): our .proto files and the modules
grpcio-tools generated from them (scripts/grpc-codegen.sh); do not edit the *_pb2* files.

Layer: broker.grpc. Importing it needs the ``grpc`` extra (grpcio, protobuf).
"""
