"""The project's exception types: one per boundary.

Every error that bad *input* can cause is one of these, so callers (the CLI above all) can tell
bad input (exit status 2, a one-line message) from a bug (a traceback).
"""

__all__ = ["ZipsgdError", "DatasetError", "StreamFormatError", "ConfigError", "OutputError",
           "OutputExistsError", "LinkError"]


class ZipsgdError(Exception):
    """Base class of every error zipsgd raises on bad input."""


class DatasetError(ZipsgdError):
    """A data source could not be read: missing file, bad syntax, NaN/Inf, ragged rows,
    empty input, constant feature where that is not allowed, unknown built-in name."""


class StreamFormatError(ZipsgdError):
    """A ``.zsgd`` file is not valid: bad magic, unsupported version, header or payload CRC
    mismatch, truncation, or header fields that contradict each other or ask for absurd sizes."""


class ConfigError(ZipsgdError):
    """A parameter is out of its documented range (bit width, bus width, formats, step size...)."""


class OutputError(ZipsgdError):
    """An output cannot be written: its folder is missing or not writable, the disk is full,
    the name is too long, or a folder stands where the file would go."""


class OutputExistsError(OutputError):
    """An output file exists (or appeared while it was written) and ``force`` was not given."""


class LinkError(ZipsgdError):
    """The host link to a board failed: the serial port cannot be opened, no reply or a
    corrupted reply within the timeout, an error reply from the bridge (``docs/HOSTLINK.md``),
    or a board that does not answer as an engine."""
