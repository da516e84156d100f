"""Checks of training code (07): a train step and an epoch that threads its state.
"""
