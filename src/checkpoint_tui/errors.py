"""Errors that the CLI turns into one actionable line and a non-zero exit, never a traceback."""


class UserFacingError(Exception):
    """Something the user can fix; str(err) is the one-line message."""
