"""The configuration is state: what a service was started with is stored, and a restart resumes it.

A service restarted after a crash with ``dlsched serve --state DIR`` alone (as the recovery docs say) must
come back as it was, not as the defaults: a queue scheduled by Sia and resumed by FIFO changes every
job's fate without a word. So the settings that decide how jobs are scheduled and where their state lives
(:data:`STORED`: policy, tunables, swapped stages and the plugin files that register them, cluster, round length, executor, checkpoint folder, database, stop grace
period, minimum run time, the folders jobs may run in, who jobs run as, the log cap) are written on the first start to the database's ``meta`` table (key
``serve_config``, JSON) and, because the database itself is one of them, to ``STATE/serve-config.json``
(mode 0600: a PostgreSQL URL may hold a password). A later start fills every flag not given from them; a
flag given with another value is refused, naming it, unless ``--reconfigure`` is given, which records the
change (meta ``serve_config_changes``) and a log line; a new ``--policy`` without ``--set`` drops the old
policy's tunables, and without stage flags its swapped stages. Where the API listens (``--port``, ``--host``) is not
part of it: a restart may listen elsewhere.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from dlsched.core import InputError
from dlsched.service.options import ServeOptions

CONFIG_KEY = "serve_config"
CHANGES_KEY = "serve_config_changes"
CONFIG_FILE = "serve-config.json"
#: The stored settings, by ServeOptions field, and the flag each is given by.
STORED: dict[str, str] = {
    "policy": "--policy", "settings": "--set", "stages": "--admission/--ordering/--allocation/--placement/"
    "--coordination", "plugins": "--plugin", "cluster": "--cluster", "address": "--address",
    "round_s": "--round-s", "executor": "--executor", "checkpoint_dir": "--checkpoint-dir",
    "database": "--database", "stop_grace_s": "--stop-grace-s", "min_run_s": "--min-run-s",
    "allow_dir": "--allow-dir", "isolation": "--isolation", "job_user": "--job-user",
    "allow_shared_account": "--allow-shared-account", "max_log_mb": "--max-log-mb",
    "explain_keep_rounds": "--explain-keep-rounds",
}


def read_file(state: Path) -> dict[str, Any] | None:
    """The configuration in ``STATE/serve-config.json``, or None when the state has none."""
    path = state / CONFIG_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {exc}", field="state") from None
    return data if isinstance(data, dict) else None


def database_of(state: Path, options: ServeOptions) -> str | None:
    """The database URL this start uses: the flag's, else the one the state was created with (None: the
    state folder's SQLite file)."""
    if "database" in options.model_fields_set:
        return options.database
    stored = read_file(state)
    value = None if stored is None else stored.get("database")
    return value if isinstance(value, str) else None


def plain(options: ServeOptions, state: Path) -> dict[str, Any]:
    """The stored fields of ``options`` as JSON values (the checkpoint folder resolved, so a restart from
    another working directory compares equal)."""
    checkpoint = (options.checkpoint_dir or state / "checkpoints").expanduser().resolve()
    values = {"policy": options.policy, "settings": dict(sorted(options.settings.items())),
              "stages": dict(sorted(options.stages.items())),
              "plugins": [str(p.expanduser().resolve()) for p in options.plugins],
              "cluster": options.cluster, "cluster_given": options.cluster_given, "address": options.address,
              "round_s": options.round_s, "executor": options.executor, "checkpoint_dir": str(checkpoint),
              "database": options.database, "stop_grace_s": options.stop_grace_s, "min_run_s": options.min_run_s,
              "allow_dir": [str(p.expanduser().resolve()) for p in options.allow_dir],
              "isolation": options.isolation, "job_user": options.job_user,
              "allow_shared_account": options.allow_shared_account, "max_log_mb": options.max_log_mb,
              "explain_keep_rounds": options.explain_keep_rounds}
    return values


def resolve(options: ServeOptions, state: Path, stored: dict[str, Any] | None) -> tuple[ServeOptions, dict[str, Any]]:
    """The options this start runs with, and what it changes of the stored ones ({field: [old, new]}).

    A field not given on the command line takes its stored value; one given with another value is an
    InputError naming its flag, unless ``options.reconfigure``."""
    if stored is None:
        return options, {}
    given = options.model_fields_set
    mine = plain(options, state)
    values = options.model_dump()
    changes: dict[str, Any] = {}
    for name, flag in STORED.items():
        if name not in stored:
            continue
        old = stored[name]
        if name not in given:
            values[name] = old
            if name == "cluster":
                values["cluster_given"] = bool(stored.get("cluster_given", False))
            continue
        if _hidden(name, mine[name]) != _hidden(name, old):  # a URL compares without its password
            if not options.reconfigure:
                raise InputError(f"{flag}: the state was created with {_show(name, old)}; pass --reconfigure "
                                 f"to change it (or leave {flag} out to keep it)")
            changes[name] = [_hidden(name, old), _hidden(name, mine[name])]
    for name in ("settings", "stages"):  # tunables and swapped stages belong to the policy they were set for
        if "policy" in changes and name not in given and stored.get(name):
            values[name] = {}
            changes[name] = [stored[name], {}]
    return ServeOptions.parse(values), changes


def _show(name: str, value: Any) -> str:
    if name == "settings":
        return "--set " + " ".join(f"{k}={v}" for k, v in value.items()) if value else "no --set"
    if name == "stages":
        return " ".join(f"--{k} {v}" for k, v in value.items()) if value else "the policy's own stages"
    if name == "plugins":
        return " ".join(f"--plugin {v}" for v in value) if value else "no --plugin"
    if name == "allow_dir":
        return " ".join(f"--allow-dir {v}" for v in value) if value else "no --allow-dir (the default folders)"
    return repr(_hidden(name, value))


def _hidden(name: str, value: Any) -> Any:
    """A database URL without its password (what goes to the log and the meta table)."""
    if name != "database" or not isinstance(value, str):
        return value
    from sqlalchemy.engine import make_url

    try:
        return make_url(value).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that does not parse is shown as it is
        return value


def save(store: Any, state: Path, options: ServeOptions, changes: dict[str, Any]) -> dict[str, Any]:
    """Store the configuration (the file, then the meta table) and the changes a reconfiguration made."""
    values = plain(options, state)
    tmp = state / f".{CONFIG_FILE}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(values, fh, indent=1)
    tmp.replace(state / CONFIG_FILE)
    shown = {**values, "database": _hidden("database", values["database"])}
    if not changes:
        store.meta_set(CONFIG_KEY, json.dumps(shown))
        return shown
    history = json.loads(store.meta_get(CHANGES_KEY) or "[]")
    history.append({"time_s": time.time(), "pid": os.getpid(), "changes": changes})
    # the new configuration, its history and the audit row in one transaction
    store.record_audit("reconfigure", "service", {"changes": changes},
                       meta={CONFIG_KEY: json.dumps(shown), CHANGES_KEY: json.dumps(history)})
    return shown


def stored_config(store: Any, state: Path) -> dict[str, Any] | None:
    """The configuration the state was created with: the meta table's, with the database URL (password and
    all) from the state's file; None on a first start."""
    raw = store.meta_get(CONFIG_KEY)
    if raw is None:
        return None
    try:
        values = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(values, dict):
        return None
    on_file = read_file(state) or {}
    if on_file.get("database") is not None and _hidden("database", on_file["database"]) == values.get("database"):
        values["database"] = on_file["database"]
    return values
