"""A stand-in for the ``expecttest`` package (not packaged by Debian), which
``torch.testing._internal.common_utils`` imports for its ``TestCase`` base class and its
``ACCEPT`` flag. The OpInfo sweep (``tests/opinfo/opinfo_sweep.py``) puts this directory on
``sys.path`` only when the real package is missing; nothing here is used by the sweep itself
(it never calls ``assertExpectedInline``)."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
