"""The torch 2 capture: ``aot_export_joint_with_descriptors`` (or ``aot_export_module``) and
``torch.export.Dim`` dynamic shapes. Imported only on torch >= 2.
"""
