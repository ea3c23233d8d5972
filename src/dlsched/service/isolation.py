"""Who a job runs as, and which of the service's files it can reach.

A job is code its user wrote and anything it writes is untrusted, so it must never run as the service:
the service's account owns ``server.json`` (the admin token), the database (every job's ``env``) and every
other job's folder. When ``dlsched serve`` runs as root it starts each job's processes, through the worker
host, under an unprivileged OS account: the account mapped to the job's dlsched user (``serve user add NAME
--os-user ACCOUNT``), else the shared job account (``--job-user``, default ``dlsched-job``, created with
``useradd`` when missing). The worker host drops the real and effective uid and gid and the supplementary
groups before the command runs (:mod:`dlsched.runtime.worker_host`), as slurmd does for a job step.

What the accounts can reach (``isolation: accounts``):

* ``STATE`` is 0711: no one else can list it, and everything in it is 0600 or 0700 the service's own
  (``dlsched.db`` and its journal files, ``server.json``, ``serve-config.json``, the logs, the lock); the
  search bit lets a job's account reach its own folder below it and nothing more.
* ``STATE/jobs/<id>`` is the service's, group the job account's, 0710: the account can enter but not write
  it, so it cannot plant a link or a FIFO where the service reads (``logs/`` is the service's alone, 0700;
  the worker host writes the ranks' output there itself). ``reports.jsonl`` is the account's, 0600, and
  ``control.json`` the service's, group the account's, 0640.
* ``CHECKPOINTS/<id>`` is the account's, 0700.

Without root (``isolation: none``) nothing can be dropped: jobs run as the service's account and can read
its state. The service says so in one warning line at start and in ``/healthz``, and refuses to serve more
than one user unless ``--allow-shared-account`` says the operator accepts that.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dlsched.core import InputError

#: The account jobs of users without an ``--os-user`` run as when none is named.
DEFAULT_JOB_USER = "dlsched-job"
#: What ``/healthz`` says: jobs under their own accounts, or as the service.
IsolationMode = Literal["accounts", "none"]
#: The files of the state that are the service's alone (0600), besides the logs.
PRIVATE_FILES = ("dlsched.db", "dlsched.db-wal", "dlsched.db-shm", "dlsched.db-journal", "server.json",
                 "admin.token", "serve-config.json", "serve.lock")


@dataclass(frozen=True)
class Account:
    """An OS account a job runs as: its name and ids on the service's host."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Isolation:
    """How this service runs jobs: ``accounts`` (with the shared job account) or ``none`` (and why not)."""

    mode: IsolationMode
    job_account: Account | None = None
    why: str = ""

    def account_for(self, os_user: str | None) -> Account | None:
        """The account a job of a user mapped to ``os_user`` (None: unmapped) runs as; None: the service's."""
        if self.mode == "none":
            return None
        if os_user:
            return lookup(os_user, field="os_user")
        return self.job_account


def lookup(name: str, *, field: str) -> Account:
    """The account ``name``; InputError naming ``field`` when there is none or it is root."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise InputError(f"there is no OS account {name!r} on this host", field=field) from None
    if entry.pw_uid == 0:
        raise InputError(f"{name!r} is root: jobs never run with root's privileges", field=field)
    return Account(name, entry.pw_uid, entry.pw_gid)


def ensure_account(name: str) -> Account:
    """The shared job account, created as a system account without a home or a login shell if missing."""
    try:
        return lookup(name, field="job_user")
    except InputError:
        pass
    try:
        done = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                               "/nonexistent", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"cannot create the job account {name!r} with useradd: {exc}", field="job_user") from None
    if done.returncode not in (0, 9):  # 9: it was created meanwhile
        raise InputError(f"cannot create the job account {name!r}: {done.stderr.strip()}", field="job_user")
    return lookup(name, field="job_user")


def resolve(requested: Literal["auto", "accounts", "none"], job_user: str) -> Isolation:
    """The isolation a service started now gets: ``auto`` is ``accounts`` when it runs as root."""
    root = os.geteuid() == 0
    if requested == "none":
        return Isolation("none", why="--isolation none: jobs run as the service's own account")
    if not root:
        if requested == "accounts":
            raise InputError("jobs can run under other accounts only when the service runs as root",
                             field="isolation")
        return Isolation("none", why="the service does not run as root, so it cannot start jobs under other "
                                     "accounts: every job runs as the service's own account and can read its "
                                     "state (server.json, the database, other jobs' folders)")
    return Isolation("accounts", ensure_account(job_user))


def unreachable(path: Path, account: Account) -> Path | None:
    """The first folder on the way to ``path`` that ``account`` cannot pass, or ``path`` itself when it is
    a file the account cannot read (None: it reaches ``path``)."""
    groups = {g.gr_gid for g in grp.getgrall() if account.name in g.gr_mem} | {account.gid}
    for folder in [*reversed(path.parents), path]:
        try:
            st = folder.stat()
        except FileNotFoundError:
            return None  # created below by the service, with the modes it needs
        bits = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH) if stat.S_ISDIR(st.st_mode) else \
            (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
        who = 0 if st.st_uid == account.uid else 1 if st.st_gid in groups else 2
        if not st.st_mode & bits[who]:
            return folder
    return None


def secure_state(state: Path, mode: IsolationMode, checkpoint_dir: Path) -> None:
    """The modes of the state's own files and folders (at every start: a state made by an older dlsched,
    or copied with other modes, is tightened)."""
    reach = 0o711 if mode == "accounts" else 0o700
    for folder in (state, state / "jobs", checkpoint_dir):
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, reach)
    for name in PRIVATE_FILES:
        path = state / name
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)
    for path in state.glob("serve.log*"):
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)


def prepare_job(jobs_root: Path, job_dir: Path, checkpoint_dir: Path, account: Account | None) -> None:
    """A job's folder (``job_dir``, under ``jobs_root``; a profile run's folder is a folder below its job's)
    and its checkpoint folder, with the owners and modes of the module docstring, before a launch.
    ``account`` None: the service's own account runs the job (0700 folders, as the service's).

    Run before every launch, so a folder from before isolation, or from another mapping, is put right."""
    between = [job_dir, *[p for p in job_dir.parents if jobs_root in p.parents]]
    for folder in (*between, job_dir / "logs", checkpoint_dir):
        folder.mkdir(parents=True, exist_ok=True)
        if folder.is_symlink():
            raise InputError(f"{folder} is a link; refusing to start a job there", field="job_dir")
    if account is None:
        for folder in (*between, job_dir / "logs", checkpoint_dir):
            os.chmod(folder, 0o700)
        return
    for folder in between:  # the account passes through, and writes nothing
        os.chown(folder, 0, account.gid)
        os.chmod(folder, 0o710)
    os.chown(job_dir / "logs", 0, 0)
    os.chmod(job_dir / "logs", 0o700)
    os.chown(checkpoint_dir, account.uid, account.gid)
    os.chmod(checkpoint_dir, 0o700)
    fd = os.open(job_dir / "reports.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.fchown(fd, account.uid, account.gid)
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


#: The meta key where a started service records the isolation it got (``accounts`` or ``none``).
META_KEY = "isolation"
SHARED_HINT = ("every job runs as the service's own account and could read the admin token; start the service "
               "as root (jobs then run under their own accounts) or pass --allow-shared-account")


def check_users(users: int, isolation: Isolation, allow_shared: bool) -> None:
    """Refuse to serve more than one user (the service's admin counts) when jobs run as the service."""
    if isolation.mode == "none" and users > 1 and not allow_shared:
        raise InputError(f"this state has {users} users, and {SHARED_HINT}", field="allow_shared_account")


def check_second_user(store: object, state: Path) -> None:
    """``serve user add`` on a state whose service runs jobs as its own account, without
    ``--allow-shared-account``: refused (the first start creates the admin, so any added user is a second)."""
    from dlsched.service import config

    mode = store.meta_get(META_KEY)  # type: ignore[attr-defined]
    stored = config.stored_config(store, state) or {}
    if mode == "none" and not stored.get("allow_shared_account", False):
        raise InputError(f"another user cannot be added: {SHARED_HINT}", field="allow_shared_account")
