"""Bytes on disk: mapped files, file queues, directory lock, atomic writes.

Layer above format/config; knows nothing of messages.
"""
