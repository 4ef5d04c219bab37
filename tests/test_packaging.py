"""A non-editable install carries the themes and sample sessions as package data."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_runs_from_its_own_files(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                          "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    wheel = next((tmp_path / "dist").glob("breakwater-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "breakwater/themes/dark.toml" in names and "breakwater/themes/light.toml" in names
    samples = [n for n in names if n.startswith("breakwater/sample_sessions/") and n.endswith(".jsonl")]
    assert len(samples) >= 5
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import breakwater, sys; from breakwater.cli.core import sample_path; "
            "assert str(sample_path()).startswith(sys.argv[1]), (breakwater.__file__, sample_path()); "
            "assert sample_path().exists(); from breakwater.cli import main; sys.exit(main(['simulate', "
            "str(sample_path()), '--json', '--counter', 'heuristic']))")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert '"turns"' in out.stdout
