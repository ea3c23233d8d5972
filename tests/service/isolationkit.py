"""What the isolation tests share: root, OS accounts made with ``useradd``, and folders those accounts can
pass through (pytest's own are 0700).

The tests need root (CI runs them as root; .ci/run makes the checkout passable for other accounts). Where
this process is not root, or the accounts cannot reach this checkout's Python, they skip and say why."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlsched.service.isolation import Account, lookup, unreachable

REPO = Path(__file__).resolve().parents[2]
#: The suite's environment without the settings tests/conftest.py gives every other service.
NO_SUITE_ISOLATION = {k: v for k, v in os.environ.items()
                      if k not in ("DLSCHED_ISOLATION", "DLSCHED_ALLOW_SHARED_ACCOUNT")}


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: jobs run under other OS accounts only when the service runs as root")
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd to create the test's OS accounts")


def os_account(name: str) -> Account:
    """The OS account ``name``, created (a system account, no home, no login) if missing; skips the test
    when it could not reach this checkout's Python and package."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True, timeout=60)
    account = lookup(name, field="os_user")
    for needed in (Path(sys.executable).resolve(), REPO / "src" / "dlsched" / "__init__.py"):
        blocked = unreachable(needed, account)
        if blocked is not None:
            pytest.skip(f"the account {name} cannot pass {blocked} to reach {needed}")
    return account


@contextlib.contextmanager
def passable_tmp() -> Iterator[Path]:
    """A temporary folder other accounts may pass through (0711) but not list."""
    base = Path(tempfile.mkdtemp(prefix="dlsched-iso-", dir="/tmp"))
    os.chmod(base, 0o711)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
