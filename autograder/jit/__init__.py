"""Checks of the jit chapter (03): compilations counted and explained, recompiles,
cache misses, donation, tracing errors, honest timing.
"""
