"""Writing a bundle's files: every one of them or none."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write(files: dict[str, str], out: Path) -> list[Path]:
    """Stage the files in a sibling temporary directory, then move them into place."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, text in files.items():
            (stage / name).write_text(text)
        if not out.exists():
            os.replace(stage, out)
            return [out / name for name in files]
        for name in files:
            os.replace(stage / name, out / name)
        return [out / name for name in files]
    finally:
        shutil.rmtree(stage, ignore_errors=True)
