"""The one error type of the measurement stage: a message a user can act on."""


class MeasureError(RuntimeError):
    """Raised for bad input (unknown model, unusable dtype, NaN output, broken data file)."""
