#!/usr/bin/env bash
# Regenerates the gRPC protocol modules (rocketstore/broker/grpc/protocol/*_pb2*.py and
# the .pyi of the messages) from the .proto files beside them, with grpcio-tools (the dev
# extra). The generated files are committed: installing rocketstore needs no protoc.
# Usage: scripts/grpc-codegen.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
out=src/rocketstore/broker/grpc/protocol
"$python" -m grpc_tools.protoc -I src \
  --python_out=src --pyi_out=src --grpc_python_out=src \
  "$out"/rocketmq_v2_types.proto "$out"/rocketmq_v2_service.proto
"$python" -c 'import grpc_tools, google.protobuf as p; print("generated with protobuf", p.__version__)'
