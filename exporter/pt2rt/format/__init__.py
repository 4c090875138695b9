"""The archive format: FlatBuffer bindings, serialize / deserialize, the zip archive, and
reading an archive back (``reader``, the reference ``executor``, ``module()``). May import
``ir``, ``ops`` and ``passes`` (serialize lowers FX graphs).
"""
