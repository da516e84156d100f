"""Checks of differentiation (01, 08): numerical gradient verification, facts of
differentiated programs, the memory of a gradient, the student's pytree classes.
"""
