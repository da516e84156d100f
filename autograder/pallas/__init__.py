"""Checks of Pallas kernels (10): kernel facts read from exported programs, the rules
they are judged by, index maps in bounds, the blocks a TPU accepts, interpret mode.
"""
