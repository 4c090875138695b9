"""Analyses and rewrites over captured graphs: partition into forward/backward, annotation,
graph and inference passes, lowering FX to the program IR, the runtime's op policy and run
bounds applied at export. May import ``ir`` and ``ops``.
"""
