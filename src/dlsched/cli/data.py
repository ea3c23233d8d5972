"""``dlsched data list|fetch``: the public data the readers use, where it comes from, and getting it.

A fresh install has no data directory; ``data list`` says which datasets exist, their origin (repository
and full commit), licence and whether this machine has them, and ``data fetch`` downloads them from their
origin repositories at the pinned commits (or from a mirror laid out like upstream), checked against the
manifest's sha256, into ``$DLSCHED_DATA`` or the user data directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import Format, FormatOpt, guard, note, out, print_json_lines, warn

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="List the public datasets dlsched reads and fetch them into the data directory.")

DataDirOpt = Annotated[Path | None, typer.Option(
    "--data-dir", help="Data directory to list or fill (default: $DLSCHED_DATA, else the user data directory).")]
ManifestOpt = Annotated[Path | None, typer.Option(
    "--manifest", help="A manifest file to use instead of the one packaged with dlsched (a newer data release, "
                       "or a local test set).")]


def _root(given: Path | None) -> Path:
    from dlsched.datadir import target_dir

    return given.expanduser() if given is not None else target_dir()


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


@app.command("list")
def list_(fmt: FormatOpt = Format.table, data_dir: DataDirOpt = None, manifest: ManifestOpt = None) -> None:
    """Every dataset: origin repository and commit, licence, size, and whether the data directory has it."""

    def run() -> None:
        from rich.table import Table

        from dlsched.data.manifest import load_manifest
        from dlsched.data.status import dataset_status

        root = _root(data_dir)
        rows = [dataset_status(d, root if root.is_dir() else None).row() for d in load_manifest(manifest)]
        if fmt is Format.json:
            print_json_lines(rows)
            return
        table = Table(title=f"data directory: {root}{'' if root.is_dir() else ' (not there yet)'}")
        for col in ("dataset", "state", "files", "size", "origin (repository@commit)", "licence", "redistribute"):
            table.add_column(col, overflow="fold")
        for r in rows:
            origins = "\n".join(f"{o['repository']}@{o['commit']}" for o in r["origins"]) or "this project"
            files = f"{r['present_files']}/{r['files']}"
            if r["unavailable"]:
                files += f" (+{len(r['unavailable'])} not downloadable)"
            table.add_row(r["name"], r["state"], files, _mb(r["size_bytes"]), origins, r["licence"],
                          "yes" if r["redistribution"] else "no")
        out.print(table)
        for r in rows:
            for u in r["unavailable"]:
                note(f"{u['file']}: not downloadable: {u['reason']}")
        note("fetch with `dlsched data fetch NAME...` or `dlsched data fetch all` (docs/data.md)")

    guard(run)


@app.command()
def fetch(names: Annotated[list[str] | None, typer.Argument(
              metavar="[NAME...|all]", help="Datasets to fetch (see `dlsched data list`); default: all.")] = None,
          mirror: Annotated[str | None, typer.Option(
              "--mirror", help="Base URL (or directory) laid out like upstream, used instead of the origin "
                               "hosts (default: $DLSCHED_DATA_MIRROR).")] = None,
          copy_from: Annotated[Path | None, typer.Option(
              "--from", help="A data directory to copy the files no download brings from (checked against "
                             "their pinned sha256).")] = None,
          force: Annotated[bool, typer.Option("--force", help="Download again files already there.")] = False,
          data_dir: DataDirOpt = None, manifest: ManifestOpt = None, fmt: FormatOpt = Format.table) -> None:
    """Download datasets from their origin repositories at the pinned commits, verify and convert them."""

    def run() -> None:
        from dlsched.core.errors import InputError
        from dlsched.data.fetch import fetch as fetch_all
        from dlsched.data.manifest import load_manifest, select

        wanted = list(names or [])
        chosen = select(load_manifest(manifest), wanted)
        explicit = bool(wanted) and "all" not in wanted
        todo = []
        for d in chosen:
            if not d.files and copy_from is None:
                reasons = "; ".join(f"{u.dest}: {u.reason}" for u in d.unavailable)
                if explicit:
                    raise InputError(f"{d.name}: no download brings it ({reasons})", field="name")
                warn(f"{d.name} skipped: no download brings it ({reasons})")
                continue
            todo.append(d)
        root = _root(data_dir)
        note(f"fetching {', '.join(d.name for d in todo)} ({_mb(sum(d.size for d in todo))} at most) into {root}")
        results = fetch_all(todo, root, mirror=mirror, force=force, copy_from=copy_from,
                            done=lambda r: note(f"{r.name}: done"))
        for r in results:
            for u in r.unavailable:
                warn(f"{r.name}/{u.dest} not fetched: {u.reason}")
        if fmt is Format.json:
            print_json_lines({"name": r.name, "where": str(root / r.name), "written": len(r.written),
                              "kept": len(r.kept), "copied": len(r.copied), "downloaded_bytes": r.downloaded_bytes,
                              "not_fetched": [f"{r.name}/{u.dest}" for u in r.unavailable]} for r in results)
            return
        for r in results:
            copied = f", {len(r.copied)} copied" if r.copied else ""
            out.print(f"{r.name}: {len(r.written)} written, {len(r.kept)} already there{copied}, "
                      f"{_mb(r.downloaded_bytes)} downloaded -> {root / r.name}", markup=False, highlight=False)

    guard(run)
