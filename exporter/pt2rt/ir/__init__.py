"""The exporter's in-memory program: descriptors (and torch 2's AOT descriptors), FX-side
described graphs, the program IR the archive holds, dtypes, constants, symbolic sizes, output
names, the calling signature and gradient sketches. Imports nothing of pt2rt but ``errors``.
"""
