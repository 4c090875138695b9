"""Capturing a model: the capture entry (one backend per torch line: ``torch1/``, ``torch2/``),
calling the model, eager references, bundled examples, dynamic shapes, device portability.
May import every other subpackage; nothing below imports it.
"""
