"""``command: torchrun --nproc-per-node N train.py``: a torchrun command line run as N ranks, no second
launcher.

Teams bring scripts they already start with ``torchrun``. The service is the launcher: it starts one process
per GPU with torchrun's environment itself (:func:`dlsched.runtime.executor.rank_env`), so a ``torchrun``
prefix is recognised and dropped, and what it would have run (``python train.py ARGS`` or
``python -m MODULE ARGS``) runs as each rank. Its options must agree with the spec: a rigid job of
``--nproc-per-node N`` and ``--nnodes K`` asks for N x K GPUs. Options that only matter to torchrun's own
rendezvous (``--rdzv-*``, ``--master-*``, ``--max-restarts``, ``--standalone``, ...) are ignored: the service
rendezvouses and restarts the job itself.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from dlsched.core import InputError

#: torchrun options that take a value (as ``--opt value`` or ``--opt=value``); the rest are flags.
_VALUED = {"--nproc-per-node", "--nproc_per_node", "--nnodes", "--node-rank", "--node_rank", "--rdzv-backend",
           "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--rdzv-conf",
           "--rdzv_conf", "--master-addr", "--master_addr", "--master-port", "--master_port", "--max-restarts",
           "--max_restarts", "--monitor-interval", "--monitor_interval", "--start-method", "--start_method",
           "--role", "--log-dir", "--log_dir", "--redirects", "-r", "--tee", "-t", "--local-addr",
           "--local_addr", "--logs-specs", "--logs_specs", "--local-ranks-filter", "--local_ranks_filter"}
_LAUNCHERS = (("torchrun",), ("python", "-m", "torch.distributed.run"), ("python3", "-m", "torch.distributed.run"))


@dataclass(frozen=True)
class TorchrunCommand:
    """What a torchrun command line asks for, and the per-rank command that replaces it."""

    nproc_per_node: int | None
    nnodes: int | None
    rank_command: str


def parse_torchrun(command: str) -> TorchrunCommand | None:
    """The torchrun invocation ``command`` is, or None when it is not one (then it runs as it is)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    prefix = next((p for p in _LAUNCHERS if tuple(words[:len(p)]) == p
                   or (p[0] == "torchrun" and words[:1] and words[0].endswith("/torchrun"))), None)
    if prefix is None:
        return None
    rest = words[len(prefix):]
    opts: dict[str, str] = {}
    module = False
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        word = rest[i]
        if word in ("-m", "--module"):
            module = True
            i += 1
            break
        name, eq, value = word.partition("=")
        if name in _VALUED and not eq:
            if i + 1 >= len(rest):
                raise InputError(f"torchrun option {name} needs a value", field="command")
            value = rest[i + 1]
            i += 1
        opts[name.replace("_", "-")] = value
        i += 1
    target = rest[i:]
    if not target:
        raise InputError("torchrun is given no script to run", field="command")
    return TorchrunCommand(_count(opts.get("--nproc-per-node"), "--nproc-per-node"),
                           _count(opts.get("--nnodes"), "--nnodes"),
                           shlex.join(["python", *(["-m"] if module else []), *target]))


def _count(value: str | None, name: str) -> int | None:
    """A fixed count, or None where torchrun would choose (``gpu``, ``auto``) or an elastic range is given."""
    if value is None or value in ("gpu", "auto", "cpu", "xpu") or ":" in value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise InputError(f"torchrun's {name} must be a positive whole number, got {value!r}", field="command")
    return int(value)


def torchrun_refusal(command: str, adaptivity: str, gpus: object) -> InputError | None:
    """Why a torchrun command and the spec's GPUs disagree (a rigid job of N ranks per node on K nodes asks
    for N x K GPUs); None when they agree or the command is no torchrun."""
    try:
        parsed = parse_torchrun(command)
    except InputError as exc:
        return exc
    if parsed is None or adaptivity != "rigid" or parsed.nproc_per_node is None or not isinstance(gpus, int):
        return None
    ranks = parsed.nproc_per_node * (parsed.nnodes or 1)
    if ranks != gpus:
        return InputError(f"the command's torchrun runs {ranks} ranks ({parsed.nproc_per_node} per node on "
                          f"{parsed.nnodes or 1} node(s)), but gpus is {gpus}; the service runs one rank per GPU",
                          field="gpus")
    return None


def rank_command(command: str) -> str:
    """What each rank runs: the script a torchrun command would run, else the command itself."""
    try:
        parsed = parse_torchrun(command)
    except InputError:
        return command
    return command if parsed is None else parsed.rank_command
