"""`python -m kerngen`."""

from .cli import run

run()
