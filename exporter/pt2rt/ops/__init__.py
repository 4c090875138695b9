"""pt2rt's own operators (``pt2rt::lstm``, ``gru``, ``rnn_*``,
``scaled_dot_product_attention``), the ATen decompositions and
traceable op forms the captures apply, and which ops are device-dependent. May import ``ir``.
"""
