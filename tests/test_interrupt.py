"""Ctrl-C ends any command with exit code 130 and one line on stderr,
wherever it lands: in the imports of the libraries, in an SMT proof (which
z3 would otherwise answer "unknown", reported as a proof not found), in the
building of kernels. Each moment is awaited from what the process writes, so
the signal lands in it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from conftest import REPO

# The command line, with every z3 search announced on stderr as it starts.
ANNOUNCING = """import sys, z3
search = z3.Solver.check
def announced(self, *assumptions):
    print("z3: searching", file=sys.stderr, flush=True)
    return search(self, *assumptions)
z3.Solver.check = announced
from kerngen.cli import main
sys.exit(main(sys.argv[1:]))
"""


def interrupted(command: list[str], when, delay: float = 0) -> tuple[int, list[str]]:
    """Run `command`, send SIGINT `delay` seconds after `when` holds of a
    line it writes to stderr; its exit code and the stderr lines it wrote
    after that line."""
    run = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    assert any(when(line) for line in iter(run.stderr.readline, "")), "the moment never came"  # stops there
    time.sleep(delay)
    run.send_signal(signal.SIGINT)
    after = run.stderr.read().splitlines()
    return run.wait(), [line for line in after if not line.startswith("import time:")]


def test_ctrl_c_during_the_imports(tmp_path):
    command = [sys.executable, "-X", "importtime", "-m", "kerngen", "emit", "tiny-257", "--out", str(tmp_path / "o")]
    code, said = interrupted(command, lambda line: line.split("|")[-1].strip() == "sympy.core")
    assert (code, said) == (130, ["kerngen: interrupted"])
    assert not (tmp_path / "o").exists()


def test_ctrl_c_during_an_smt_proof_is_no_verdict(tmp_path):
    command = [sys.executable, "-c", ANNOUNCING, "emit", "kyber-r1-7681", "--out", str(tmp_path / "o")]
    # the first search (a Shoup product's lemma) takes most of a second: a tenth in, z3 is searching
    code, said = interrupted(command, lambda line: line.startswith("z3: searching"), delay=0.1)
    assert (code, said) == (130, ["kerngen: interrupted"])


def test_ctrl_c_while_building(tmp_path):
    command = [sys.executable, "-m", "kerngen", "emit", "kyber-3329", "--out", str(tmp_path / "o")]
    code, said = interrupted(command, lambda line: "building and verifying kernels" in line)
    assert (code, said) == (130, ["kerngen: interrupted"])
    assert not (tmp_path / "o").exists()
