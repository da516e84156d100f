"""Checks of sharding (06): meshes and device sets, which device holds each slice,
collectives and what they move, data-parallel steps.
"""
