"""Checks of the control-flow chapter (05): jit-compatible control flow and static
arguments, loops that stay loops, gradients through loops.
"""
