"""Checks of batching (02): vmap against a Python loop, no loop left, mapping in chunks.
"""
