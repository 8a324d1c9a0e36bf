"""An emitted bundle read back from disk: its manifest, checked against its files.

A bundle copied into another project is tested from this alone (`kerngen
test BUNDLE_DIR`): the manifest says what every function requires and
ensures, and its sha256 lines say whether the files are the ones it describes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import BundleError

MANIFEST = "manifest.json"


def is_bundle(path: Path) -> bool:
    """Whether `path` names a bundle: its directory, or its manifest."""
    path = Path(path)
    return (path.is_dir() and (path / MANIFEST).is_file()) or (path.name == MANIFEST and path.is_file())


def read_bundle(path: Path) -> tuple[Path, dict]:
    """(bundle directory, manifest) for a bundle directory or its manifest.json."""
    path = Path(path)
    directory = path.parent if path.name == MANIFEST else path
    file = directory / MANIFEST
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except OSError as e:
        raise BundleError(f"{file}: cannot be read: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BundleError(f"{file}: is not a kerngen manifest: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("generator", {}).get("name") != "kerngen":
        raise BundleError(f"{file}: is not a kerngen manifest (no generator kerngen)")
    for name, digest in manifest.get("files", {}).items():
        try:
            actual = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        except OSError as e:
            raise BundleError(f"{directory / name}: listed in the manifest but cannot be read: {e.strerror}") from None
        if actual != digest:
            raise BundleError(f"{directory / name}: does not match its manifest (sha256 {actual[:12]}..., manifest "
                              f"{digest[:12]}...): the file was changed after kerngen wrote it")
    return directory, manifest


def objects(manifest: dict) -> list[dict]:
    """The manifest's .asm files, each with its ABI and object format."""
    found = manifest.get("objects")
    if not isinstance(found, list) or not found or not all(
            isinstance(o, dict) and {"file", "abi", "format"} <= o.keys() for o in found):
        raise BundleError("the manifest lists no objects (file, abi, format): it was written by another kerngen "
                          "version; emit the bundle again")
    return found
