"""The parallel rebuild plan: CommitLog ranges -> ConsumeQueues and IndexFiles.

Layer: above the store; ``spark`` runs the plan on Spark, ``cli`` on local processes.
"""
