"""The broker and name server: RocketMQ's remoting protocol over the store (asyncio).

Layer: above the store, beside ``spark``; only ``cli`` imports it.
"""
