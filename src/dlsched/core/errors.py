"""User-facing error type.

Everything that comes from outside (trace files, cluster YAML, CLI flags, job specs) is validated at the
edge; a problem there raises :class:`InputError`, which the CLI turns into one line on stderr and exit code 2.
Keeping one type means no layer has to know how the CLI reports errors.
"""

from __future__ import annotations


class InputError(ValueError):
    """A problem with user input, phrased as one line that names the file, line or field at fault."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        where = ""
        if source is not None:
            where = source if line is None else f"{source}:{line}"
        if field is not None:
            where = f"{where} field '{field}'" if where else f"field '{field}'"
        self.source, self.line, self.field = source, line, field
        super().__init__(f"{where}: {message}" if where else message)
