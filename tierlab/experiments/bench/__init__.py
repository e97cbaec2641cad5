"""Benchmarks: each compares tierlab with real peers in the same run and writes JSON."""
