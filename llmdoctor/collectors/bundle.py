"""Read and write incident bundles (llmdoctor-bundle/1): a folder or a .tar.gz of native outputs.

Reading never executes anything and never follows a path outside the bundle: archive members
with absolute paths, `..`, links pointing outside, device files, oversized members and corrupt or
truncated archives are refused with a one-line BadBundle error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.textsource import TextSource
from llmdoctor.errors import BadBundle
from llmdoctor.parsers.k8s_pod import previous_logs_wanted
from llmdoctor.redact import redact_json, redact_text

FORMAT = "llmdoctor-bundle/1"
MAX_MEMBER_BYTES = 512 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
MAX_MEMBERS = 10_000
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # JSON/XML/metrics are read whole; logs are streamed


def _is_log(rel: str) -> bool:
    return (rel.startswith("logs/") and rel.endswith(".log")) or rel == "node/kernel.log"


def _check_member_name(name: str) -> str:
    if not name or any(ord(c) < 0x20 for c in name):
        raise BadBundle(f"bundle member {name!r} has an empty name or control characters; refusing")
    p = PurePosixPath(name)
    if name.startswith("/") or p.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise BadBundle(f"bundle member {name!r} has an absolute path; refusing to read it")
    if ".." in p.parts:
        raise BadBundle(f"bundle member {name!r} escapes the bundle ('..'); refusing to read it")
    return str(p)


def _archive_error(path: Path, exc: BaseException) -> BadBundle:
    try:
        empty = path.stat().st_size == 0
    except OSError:
        empty = False
    if empty:
        return BadBundle(f"{path}: empty file, not an llmdoctor bundle")
    # tarfile's "file could not be opened successfully:" lists one reason per method below it
    detail = str(exc).splitlines()[0].rstrip(": ") if str(exc) else ""
    if not detail or detail == "file could not be opened successfully":
        detail = "not a tar, tar.gz, tar.bz2 or tar.xz archive"
    return BadBundle(f"{path}: corrupt or truncated archive ({detail})")


def _plan_extraction(path: Path) -> list[tuple[str, str]]:
    """Read every member header of an archive before anything is written: refuse unsafe
    names, links outside, devices, and members or totals over the caps; return
    (member name, kind) pairs, kind being "dir" or "file", for the extraction pass.

    An archive that unpacks to more than the cap is refused having written nothing.
    """
    total = 0
    plan: list[tuple[str, str]] = []
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                if len(plan) >= MAX_MEMBERS:
                    raise BadBundle(f"{path}: more than {MAX_MEMBERS} members; refusing")
                name = _check_member_name(member.name)
                if member.issym() or member.islnk():
                    link = PurePosixPath(member.linkname)
                    base = PurePosixPath(name).parent if member.issym() else PurePosixPath()
                    resolved = os.path.normpath(str(base / link))
                    if link.is_absolute() or resolved.startswith(".."):
                        raise BadBundle(
                            f"bundle member {name!r} links outside the bundle "
                            f"({member.linkname!r}); refusing to read it"
                        )
                    continue  # in-bundle links are not needed by any reader; ignore them
                if member.isdir():
                    plan.append((name, "dir"))
                    continue
                if not member.isfile():
                    raise BadBundle(f"bundle member {name!r} is not a regular file; refusing")
                if member.size > MAX_MEMBER_BYTES:
                    raise BadBundle(
                        f"bundle member {name!r} is {member.size // (1024 * 1024)} MiB, over the "
                        f"{MAX_MEMBER_BYTES // (1024 * 1024)} MiB cap"
                    )
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise BadBundle(
                        f"{path}: unpacks to more than {MAX_TOTAL_BYTES >> 30} GiB; refusing "
                        "(nothing was written)"
                    )
                plan.append((name, "file"))
    except BadBundle:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise _archive_error(path, exc) from None
    return plan


def _extract_archive(path: Path, dest: Path) -> Path:
    """Safely extract a .tar(.gz) into dest; return the bundle root (folder holding manifest).

    Two passes: the headers are checked first (see _plan_extraction), then the planned
    members are copied; a member whose data differs from its header's size is refused.
    """
    planned = dict(_plan_extraction(path))
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                name = _check_member_name(member.name)
                kind = planned.get(name)
                if kind == "dir":
                    (dest / name).mkdir(parents=True, exist_ok=True)
                    continue
                if kind != "file" or not member.isfile():
                    continue
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                if src is None:
                    raise BadBundle(f"bundle member {name!r} cannot be read")
                with src, open(target, "wb") as out:
                    # never more than the header said (checked against the caps above)
                    shutil.copyfileobj(_Capped(src, member.size), out, 1024 * 1024)
    except BadBundle:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise _archive_error(path, exc) from None
    manifests = [p for p in dest.rglob("manifest.json") if len(p.relative_to(dest).parts) <= 2]
    if not manifests:
        raise BadBundle(f"{path}: no manifest.json in the archive; not an llmdoctor bundle")
    return sorted(manifests, key=lambda p: len(p.parts))[0].parent


class _Capped:
    """A read-only view of at most `limit` bytes of a file object."""

    def __init__(self, raw, limit: int):
        self.raw, self.left = raw, limit

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.raw.read(n) if n else b""
        self.left -= len(data)
        return data


def read_manifest(root: Path, shown: Path) -> dict[str, Any]:
    mpath = root / "manifest.json"
    if not mpath.is_file():
        raise BadBundle(f"{shown}: manifest.json is missing; not an llmdoctor bundle")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadBundle(f"{shown}/manifest.json: not valid JSON ({exc})") from None
    except RecursionError:
        raise BadBundle(f"{shown}/manifest.json: nested too deeply to read") from None
    if not isinstance(manifest, dict):
        raise BadBundle(f"{shown}/manifest.json: must be a JSON object")
    fmt = manifest.get("format")
    if fmt != FORMAT:
        raise BadBundle(f"{shown}/manifest.json: format is {fmt!r}, expected {FORMAT!r}")
    return manifest


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Bundle:
    """An opened bundle; use as a context manager so an extracted archive is cleaned up."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._tmp: tempfile.TemporaryDirectory | None = None
        if not self.path.exists():
            raise BadBundle(f"{self.path}: no such file or folder")
        if self.path.is_dir():
            self.root = self.path
        elif not self.path.is_file():  # /dev/zero, a FIFO: would be read forever
            raise BadBundle(
                f"{self.path}: not a regular file or folder; give a bundle folder or .tar.gz"
            )
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="llmdoctor-bundle-")
        try:
            if self._tmp is not None:
                self.root = _extract_archive(self.path, Path(self._tmp.name))
            self.manifest = read_manifest(self.root, self.path)
        except BaseException:  # a refusal, Ctrl-C or SIGTERM: nothing stays in the temp folder
            self.close()
            raise

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def files(self) -> list[str]:
        """Relative paths of the regular files inside the bundle.

        Linked folders are not entered; a link to a file outside the bundle, or a link loop,
        is refused.
        """
        root = self.root.resolve()
        out = []
        for folder, dirs, names in os.walk(self.root, followlinks=False, onerror=None):
            dirs.sort()
            for name in sorted(names):
                p = Path(folder) / name
                rel = p.relative_to(self.root).as_posix()
                if p.is_symlink():
                    try:
                        target = p.resolve(strict=True)
                    except FileNotFoundError:
                        continue  # a dangling link holds nothing
                    except (OSError, RuntimeError):
                        raise BadBundle(f"{self.path}: {rel} is a link loop; refusing") from None
                    if not target.is_relative_to(root):
                        raise BadBundle(f"{self.path}: {rel} links outside the bundle; refusing")
                if p.is_file() and rel != "manifest.json":
                    out.append(rel)
        return out

    def to_facts(self) -> Facts:
        """Every file of the bundle as a fact keyed by its path, plus time/now and target."""
        facts = Facts()
        for rel in self.files():
            path = self.root / rel
            if _is_log(rel):
                facts.set(rel, TextSource.from_file(rel, path))
                continue
            size = path.stat().st_size
            if size > MAX_DOCUMENT_BYTES:
                facts.mark_missing(rel, f"{size >> 20} MiB is over the document cap")
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if rel.endswith(".json"):
                try:
                    facts.set(rel, json.loads(text))
                except json.JSONDecodeError as exc:
                    reason = f"not valid JSON (line {exc.lineno}: {exc.msg})"
                    facts.mark_missing(rel, reason)
                    facts.collector_errors[f"bundle {rel}"] = reason
                except RecursionError:
                    reason = "JSON nested too deeply to read"
                    facts.mark_missing(rel, reason)
                    facts.collector_errors[f"bundle {rel}"] = reason
            else:
                facts.set(rel, text)
        for field in ("collector_errors", "missing"):
            value = self.manifest.get(field)
            if value is not None and not isinstance(value, dict):
                raise BadBundle(f"{self.path}/manifest.json: '{field}' must be a JSON object")
        for key, why in (self.manifest.get("collector_errors") or {}).items():
            facts.collector_errors[str(key)] = str(why)
        for key, why in (self.manifest.get("missing") or {}).items():
            facts.mark_missing(str(key), str(why))
        # a restarted container's previous log is wanted: its absence is said, not taken as a
        # log without errors (a bundle made by hand, or cut down)
        for key in previous_logs_wanted(facts.get("k8s/pod.json")):
            if facts.get(key) is None and key not in facts.missing():
                facts.mark_missing(key, "not in the bundle, though the container restarted")
        now = _parse_time(self.manifest.get("collected_at"))
        facts.set("time/now", now if now is not None else self.root.stat().st_mtime)
        target = self.manifest.get("target")
        if target is not None and not isinstance(target, str):
            raise BadBundle(f"{self.path}/manifest.json: 'target' must be a string")
        facts.set("target", target or str(self.path))
        for key in ("k8s/", "logs/", "vllm/", "node/"):
            facts.mark_missing(key, "not in the bundle")
        return facts


def _serialize(key: str, value: Any) -> bytes | None:
    if isinstance(value, TextSource):
        return redact_text(value.read_text()).encode("utf-8")
    if key.endswith(".json"):
        return (json.dumps(redact_json(value), indent=2, ensure_ascii=False) + "\n").encode()
    if isinstance(value, str):
        return redact_text(value).encode("utf-8")
    return None


BUNDLE_FOLDERS = ("k8s", "logs", "vllm", "node", "serving", "prometheus", "model")
BUNDLE_ROOT_FILES = ("manifest.json", "tokenizer.json")
# Every file a bundle holds (docs/bundle-format.md), as a path relative to the bundle root.
# `collect --force` replaces a bundle only when each of its files matches: anything else (notes,
# a retro, a spreadsheet) is someone's and must not be deleted with it.
BUNDLE_FILE = re.compile(
    r"(manifest|tokenizer)\.json"
    r"|k8s/(pod|events|node|owner|gpu-nodes)\.json"
    r"|logs/[A-Za-z0-9][A-Za-z0-9._-]*\.log"
    r"|vllm/(metrics-\d+\.txt|(scrapes|health|models|probe|version)\.json)"
    r"|node/(nvidia-smi\.xml|kernel\.log|(versions|gpus|nvml)\.json)"
    r"|serving/vllm-args\.json"
    r"|prometheus/(query|series)\.json"
    r"|model/config\.json"
)


def is_bundle_path(rel: str, is_dir: bool = False) -> bool:
    """Whether `rel` (relative to the bundle root, '/'-separated) is a path a bundle holds."""
    if is_dir:
        return rel in BUNDLE_FOLDERS
    return BUNDLE_FILE.fullmatch(rel) is not None


def is_bundle_archive(path: Path) -> bool:
    """True when `path` is a .tar.gz whose manifest.json says llmdoctor-bundle/1."""
    try:
        with tarfile.open(path, "r:*") as tar:
            for n, member in enumerate(tar):
                if n > MAX_MEMBERS:
                    return False
                if PurePosixPath(member.name).name == "manifest.json" and member.isfile():
                    if member.size > MAX_DOCUMENT_BYTES:
                        return False
                    src = tar.extractfile(member)
                    manifest = json.loads(src.read()) if src is not None else None
                    return isinstance(manifest, dict) and manifest.get("format") == FORMAT
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError, RecursionError):
        return False
    return False


def foreign_members(path: Path) -> list[str]:
    """Members of a bundle archive that a bundle does not hold (NOTES.md, data.csv, links):
    what replacing the archive would destroy. Member names are only read, never extracted.
    """
    try:
        with tarfile.open(path, "r:*") as tar:
            members = []
            for n, member in enumerate(tar):
                if n > MAX_MEMBERS:
                    return [f"(more than {MAX_MEMBERS} members)"]
                members.append(member)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        return [f"({exc})"]
    names = [str(PurePosixPath(m.name)) for m in members]
    roots = [PurePosixPath(n).parent for n in names if PurePosixPath(n).name == "manifest.json"]
    root = min(roots, key=lambda r: len(r.parts)) if roots else PurePosixPath(".")
    foreign = []
    for member, name in zip(members, names, strict=True):
        p = PurePosixPath(name)
        if member.isdir() and p.parts == root.parts[: len(p.parts)]:
            continue  # the archive's top folder (or its parents)
        try:
            rel = p.relative_to(root).as_posix()
        except ValueError:
            foreign.append(member.name)
            continue
        if member.isdir() and is_bundle_path(rel, is_dir=True):
            continue
        if member.isfile() and is_bundle_path(rel):
            continue
        foreign.append(member.name)
    return foreign


def foreign_files(folder: Path) -> list[str]:
    """Files in a folder that an llmdoctor bundle does not hold (all of them when it has no
    llmdoctor manifest), at every depth: what overwriting the folder would destroy.
    """
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        manifest = None
    if not (isinstance(manifest, dict) and manifest.get("format") == FORMAT):
        return sorted(p.name for p in folder.iterdir()) or []
    try:
        return sorted(
            rel.as_posix() for p in folder.rglob("*") if not _ours(rel := p.relative_to(folder), p)
        )
    except OSError as exc:  # a link loop, an unreadable sub-folder: not ours to delete
        return [f"({exc.strerror or exc})"]


def _ours(rel: PurePosixPath | Path, p: Path) -> bool:
    """Whether a path inside a bundle folder is one a bundle holds (and may be replaced)."""
    if p.is_symlink():
        return False
    if p.is_dir():
        return is_bundle_path(rel.as_posix(), is_dir=True)
    return p.is_file() and is_bundle_path(rel.as_posix())


def _listed(foreign: list[str]) -> str:
    return ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
# names that look like an archive of another kind: written as a folder they would mislead
_OTHER_ARCHIVE = re.compile(
    r"\.(zip|tar|tar\.\w+|tgz|t[bx]z2?|tbz|tzst|gz|bz2|xz|zst|lz4|lzma|7z|rar|jar|whl)$",
    re.IGNORECASE,
)


def check_bundle_name(dest: str | Path) -> None:
    """A bundle is written as FILE.tar.gz / FILE.tgz or as a folder whose name does not look
    like another kind of archive (incident.zip, x.tar, x.tar.bz2 are refused, not made folders).
    """
    name = os.path.basename(os.path.normpath(str(dest)))
    if name.endswith(ARCHIVE_SUFFIXES):
        return
    other = _OTHER_ARCHIVE.search(name)
    if other:
        raise BadBundle(
            f"-o {dest}: {other.group(0)} is not supported; a bundle is written as "
            "FILE.tar.gz, FILE.tgz or a folder name without an archive suffix"
        )


def check_destination(dest: str | Path, force: bool = False) -> Path:
    """Where a bundle may be written: a new path, or with `force` an existing llmdoctor bundle.

    Nothing else is ever replaced: not a device (/dev/null), not the current folder, not a
    folder holding other files (earlier incidents, notes), not a file that is not a bundle.
    """
    dest = Path(dest)
    if os.path.basename(os.path.normpath(str(dest))) in ("", ".", "..", "/"):
        raise BadBundle(
            f"-o {dest}: give a file or folder name for the bundle, e.g. incident.tar.gz"
        )
    check_bundle_name(dest)
    if not dest.exists() and not dest.is_symlink():
        return dest
    if not force:
        raise BadBundle(f"{dest} already exists; choose another name or pass --force")
    if dest.is_symlink():
        raise BadBundle(f"{dest} is a symbolic link; refusing to overwrite it")
    if dest.is_dir():
        if dest.resolve() == Path.cwd().resolve():
            raise BadBundle(f"-o {dest} is the current folder; refusing to overwrite it")
        foreign = foreign_files(dest)
        if foreign:
            raise BadBundle(
                f"{dest} is a folder that is not only an llmdoctor bundle ({_listed(foreign)}); "
                "refusing to overwrite it, even with --force"
            )
        return dest
    if not dest.is_file():
        raise BadBundle(f"{dest} is not a regular file or folder; refusing to write a bundle there")
    if not is_bundle_archive(dest):
        raise BadBundle(
            f"{dest} exists and is not an llmdoctor bundle; refusing to overwrite it, even with --force"
        )
    foreign = foreign_members(dest)
    if foreign:
        raise BadBundle(
            f"{dest} is an archive that is not only an llmdoctor bundle ({_listed(foreign)}); "
            "refusing to overwrite it, even with --force"
        )
    return dest


def _write_tree(
    dest: Path, name: str, as_archive: bool, manifest: dict, documents: dict[str, bytes]
) -> None:
    """Build the bundle in a temporary folder next to dest, then rename it into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".llmdoctor-collect-", dir=dest.parent) as tmp:
        root = Path(tmp) / name.removesuffix(".tar.gz").removesuffix(".tgz")
        root.mkdir()
        (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        for key, data in documents.items():
            _check_member_name(key)
            out = root / key
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        if as_archive:
            partial = Path(tmp) / "bundle.tar.gz"
            with tarfile.open(partial, "w:gz") as tar:
                tar.add(root, arcname=root.name)
            os.replace(partial, dest)
        elif dest.exists():
            # swap: the old bundle moves into the temporary folder and goes with it
            os.replace(dest, Path(tmp) / "previous")
            os.replace(root, dest)
        else:
            os.replace(root, dest)


def _reasons(reasons: dict[str, str]) -> dict[str, str]:
    """Why each key or collector is missing, sorted: our own sentences, which may quote what a
    server or the API said (an error body, an exec's output), so each is redacted as text. Not
    by the key's name: a sidecar called `credential-helper` names no secret, and its reason
    ("container credential-helper has not started") is evidence."""
    return {key: redact_text(str(why)) for key, why in sorted(reasons.items())}


def write_bundle(
    facts: Facts, dest: str | Path, target: str, namespace: str | None = None, force: bool = False
) -> Path:
    """Write the file-shaped facts as a bundle folder or .tar.gz (chosen by dest's suffix).

    Secrets are redacted. An existing dest is replaced only with `force`, and only when it is
    itself an llmdoctor bundle (see check_destination). The bundle is built next to dest and
    renamed into place, so a failure leaves the old one (or nothing) rather than half of one.
    """
    dest = check_destination(dest, force)
    manifest = {
        "format": FORMAT,
        "target": redact_text(target),
        "namespace": redact_text(namespace) if namespace else namespace,
        "collected_at": datetime.fromtimestamp(facts.get("time/now") or time.time(), UTC)
        .isoformat()
        .replace("+00:00", "Z"),
        "collector_errors": _reasons(facts.collector_errors),
        "missing": _reasons(facts.missing()),
    }
    documents: dict[str, bytes] = {}
    for key, value in facts.items():
        if key.startswith(("time/", "wiki/", "settings/")):
            continue
        if "/" not in key and key != "tokenizer.json":  # 'target'; tokenizer.json is a root file
            continue
        if not key.split("/")[-1].count("."):  # derived facts have no file extension
            continue
        data = _serialize(key, value)
        if data is not None:
            documents[key] = data
    name = Path(os.path.abspath(dest)).name
    as_archive = name.endswith((".tar.gz", ".tgz"))
    try:
        _write_tree(dest, name, as_archive, manifest, documents)
    except OSError as exc:  # a read-only folder, a full disk: nothing half-written is left
        raise BadBundle(f"cannot write {dest}: {exc.strerror or exc}") from None
    return dest
