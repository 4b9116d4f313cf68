"""Benchmark scripts (never collected by pytest, never asserting times)."""
