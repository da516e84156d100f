"""Checks of the debugging chapter (09): results and debug callbacks, checkify,
configuration flags put back, profiler traces.
"""
