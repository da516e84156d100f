"""``python -m grader.tools.test_times [artifacts/pytest.xml] [--top N]``: where the
test suite's time went, from the JUnit file `make test` writes.

pytest prints its 30 slowest steps; this groups every test's time (setup, call and
teardown, as pytest's JUnit file records them) by file and by parameter (a module's
tests share its fixtures' cost), so the next lever for `make test`'s time is visible.
With two xdist workers the wall time is about half the total printed here.
"""
from __future__ import annotations

import argparse
import collections
import re
import xml.etree.ElementTree as ET


def times(path: str) -> list[tuple[str, str, float]]:
    """``(file, test name, seconds)`` for every test case in the JUnit file."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        file = case.get("file") or case.get("classname", "?").replace(".", "/") + ".py"
        out.append((file, case.get("name", "?"), float(case.get("time") or 0.0)))
    return out


def report(rows: list[tuple[str, str, float]], top: int = 15) -> str:
    by_file: dict[str, float] = collections.Counter()
    by_param: dict[str, float] = collections.Counter()
    for file, name, secs in rows:
        by_file[file] += secs
        param = re.search(r"\[([^\]-]+)", name)
        by_param[param.group(1) if param else "(no parameter)"] += secs
    total = sum(secs for _, _, secs in rows)
    lines = [f"{len(rows)} tests, {total:.0f} s in all (summed over workers)", "",
             "by file:"]
    lines += [f"  {secs:8.1f} s  {file}" for file, secs in
              sorted(by_file.items(), key=lambda kv: -kv[1])[:top]]
    lines += ["", "by parameter (a module's tests together):"]
    lines += [f"  {secs:8.1f} s  {param}" for param, secs in
              sorted(by_param.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", nargs="?", default="artifacts/pytest.xml")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    print(report(times(args.junit), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
