"""The torch 1.13 capture: ``make_fx`` over a joint function, and its dynamic-shape machinery
(symbolic rules for ops torch 1.13's meta kernels lack). Imported only on torch < 2.
"""
