from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def write_params(tmp_path):
    """Write a parameter file from a dict (TOML by hand: flat keys only)."""
    def make(table: dict, name: str = "p.toml") -> Path:
        lines = []
        for k, v in table.items():
            if isinstance(v, str):
                lines.append(f'{k} = "{v}"')
            elif isinstance(v, bool):
                lines.append(f"{k} = {'true' if v else 'false'}")
            else:
                lines.append(f"{k} = {v}")
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        return path
    return make
