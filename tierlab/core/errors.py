"""The one exception type for user-facing errors: the CLI prints its message
and exits with status 2, never a traceback."""


class TierlabError(Exception):
    pass
