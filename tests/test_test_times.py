"""The suite's time report (grader/tools/test_times.py) reads pytest's own JUnit file."""
import subprocess
import sys

from grader.tools import test_times


def test_times_are_grouped_by_file_and_by_parameter(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest, time\n"
        "@pytest.mark.parametrize('m', ['01_grad', '02_vmap'])\n"
        "def test_a(m):\n    time.sleep(0.2 if m == '02_vmap' else 0.0)\n"
        "def test_b():\n    pass\n")
    xml = tmp_path / "out.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:xdist", "-o", "addopts=", f"--junitxml={xml}",
                    str(tmp_path / "test_x.py")], check=True, cwd=tmp_path,
                   capture_output=True)
    rows = test_times.times(str(xml))
    assert sorted(name for _, name, _ in rows) == ["test_a[01_grad]", "test_a[02_vmap]",
                                                   "test_b"]
    text = test_times.report(rows)
    assert text.startswith("3 tests,")
    slow = next(line for line in text.splitlines() if line.endswith("02_vmap"))
    assert float(slow.split()[0]) >= 0.2
    assert "(no parameter)" in text
