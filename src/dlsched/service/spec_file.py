"""A job spec file as ``dlsched submit``, ``dlsched spec check`` and :class:`dlsched.Client` read it.

YAML is read with ``yaml.safe_load`` (no object tags: a spec is data, never code), at most 1 MiB of it and
nested at most 32 deep (a hostile file ends in one ``error:`` line, not a traceback or a full memory). ``working_dir`` is made
absolute relative to the spec file's folder (the folder itself when the spec gives none), so a spec can sit
beside the code it runs and be submitted from anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlsched.core import InputError

#: The largest spec file read (the API's default body limit, ``--max-body-kb``, is the same), and the deepest
#: nesting of mappings and lists in it: a spec's deepest field is two levels down (``gpus.min``, ``env.X``).
MAX_SPEC_BYTES = 1 << 20
MAX_SPEC_DEPTH = 32
MAX_SPEC_ALIASES = 64


def _check_depth(yaml: Any, text: str, source: str) -> None:
    """Refuse nesting deeper than :data:`MAX_SPEC_DEPTH` from the parser's events, before the recursive
    composer could run out of stack on it."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1  # each may stand for a whole subtree: a few nested ones expand beyond any memory
            if aliases > MAX_SPEC_ALIASES:
                raise InputError(f"more than {MAX_SPEC_ALIASES} YAML aliases (*name)", source=source,
                                 line=event.start_mark.line + 1)
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                raise InputError(f"nested deeper than {MAX_SPEC_DEPTH} levels", source=source,
                                 line=event.start_mark.line + 1)
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


def read_spec_yaml(path: Path) -> dict[str, Any]:
    """The spec file's mapping, as written; InputError for a file that cannot be read, is not YAML, or is
    not a mapping."""
    import yaml

    source = str(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read the job spec: {exc.strerror}", source=source) from None
    if len(raw) > MAX_SPEC_BYTES:
        raise InputError(f"the job spec is larger than {MAX_SPEC_BYTES // 1024} KiB (a spec names a command, it "
                         "does not hold data)", source=source)
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", source=source) from None
    try:
        _check_depth(yaml, text, source)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", source=source,
                         line=None if mark is None else mark.line + 1) from None
    if not isinstance(data, dict):
        raise InputError("a job spec must be a mapping of fields (name, command, gpus, ...)", source=source)
    return data


def resolve_working_dir(path: Path, data: dict[str, Any]) -> str:
    """``working_dir`` of the spec at ``path`` as an absolute, existing folder."""
    given = data.get("working_dir", ".")
    if not isinstance(given, str) or not given:
        raise InputError("must be a path", source=str(path), field="working_dir")
    folder = (path.resolve().parent / Path(given).expanduser()).resolve()
    if not folder.is_dir():
        raise InputError(f"{folder} is not an existing folder", source=str(path), field="working_dir")
    return str(folder)


def load_spec(path: Path) -> dict[str, Any]:
    """The spec file as the JSON body to submit: checked, ``working_dir`` absolute and existing."""
    from dlsched.service.spec import parse_submission

    data = read_spec_yaml(path)
    data["working_dir"] = resolve_working_dir(path, data)
    return parse_submission(data, source=str(path)).model_dump(mode="json", exclude_none=True)
