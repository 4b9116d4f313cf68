"""One module per workload; each has ``NAME`` and ``run(sizes, scratch) -> list[Row]``.

Layer: benchmark workloads. Workloads talk to systems only through ``benchmarks.systems``
adapters (rocketstore-only figures reach into the adapter's ``store``).
"""
