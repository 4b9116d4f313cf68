"""RocketMQ's remoting protocol, below the broker and the Spark source that both speak it:
request and response codes (:mod:`.codes`), the frame and header codec (:mod:`.codec`), a
connection's protocol without I/O (:mod:`.connection`, which every driver feeds), what a
request handler sees of a connection (:mod:`.peer`) and a blocking client
(:mod:`.blocking`).

Layer: remoting. Imports only config, java_ints and errors; never the store, the broker or
pyspark.
"""
