"""Real RocketMQ client scripts the broker workload runs in subprocesses."""
