"""Checks of PRNG keys (04): key discipline, keys as data, distributions judged with
stated false-rejection rates, the shape of the key tree.
"""
