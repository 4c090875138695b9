"""Typed errors of the exporter and the Python reader.

``ExportError`` (a ``ValueError``) is the base of everything ``pt2rt.export`` raises on bad
input; ``ExportTypeError`` is also a ``TypeError`` (wrong kind of argument: not a Module, a
non-tensor input). ``CaptureError`` wraps a failure of tracing the model and names the model
class and the original exception. ``FormatError`` is raised by ``pt2rt.load`` on a damaged or
foreign archive and names the entry concerned. ``InputError`` is raised by the reader's
``run_inference`` / ``run_forward`` / ``train_step`` on inputs that do not fit the archive's
signature (C++: ``pt2rt::InputError``).
"""


class ExportError(ValueError):
    """Bad arguments to ``pt2rt.export`` or a model it cannot export; the message names why."""


class ExportTypeError(ExportError, TypeError):
    """An argument of the wrong type (e.g. ``model`` is not a ``torch.nn.Module``)."""


class CaptureError(ExportError):
    """Tracing the model failed (untraceable Python in ``forward``, unsupported op, ...)."""


class FormatError(ValueError):
    """An archive that is not a valid pt2rt archive; the message names the entry involved."""


class InputError(ValueError):
    """User inputs that do not fit an archive's signature (count, unknown/missing/repeated
    names, dtype, rank, a static size, a dynamic dim outside its range); names the input."""
