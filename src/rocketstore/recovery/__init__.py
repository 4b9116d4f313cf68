"""Crash recovery: abort marker, checkpoint file, CommitLog and queue recovery.

Layer: recovery (beside services; above the structures).
"""
