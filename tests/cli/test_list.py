"""`tierlab list`: the registries users type names from."""
import subprocess
import sys

from tierlab import native
from tierlab.cli import main


def test_list_codecs_prints_every_registry_codec(capsys):
    assert main(["list", "codecs"]) == 0
    out = capsys.readouterr().out
    for c in native.codecs():
        assert any(line.split()[:1] == [c.name] and line.split()[-1] == c.impl
                   for line in out.splitlines()), c.name


def test_unknown_registry_is_a_usage_error_without_traceback():
    r = subprocess.run([sys.executable, "-m", "tierlab", "list", "nonsense"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "invalid choice" in r.stderr and "Traceback" not in r.stderr
