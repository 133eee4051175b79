"""Errors that end a command with a one-line message and exit code 3."""


class LlmdoctorError(Exception):
    """A problem with the user's input or environment; the message is shown as one line."""


class BadTarget(LlmdoctorError):
    """The target string is not one of the accepted forms."""


class BadBundle(LlmdoctorError):
    """An incident bundle is unsafe, corrupt, or not an llmdoctor-bundle/1."""


class BadInput(LlmdoctorError):
    """A file or option given by the user cannot be used."""
