"""The recorded survivors of a module's last mutation run, each applied again and run against
today's tests: after tests were added for them, this says which they now kill, in minutes
rather than the hour a whole new run of the module takes.

    .venv/bin/python tools/mutation_recheck.py stages/analytics/counting.py

Each survivor's diff (tools/results/mutation.json) is applied at its line, the module's tests
run as tools/mutation.py runs them, and the file restored. A survivor now killed moves to the
killed count; the module's entry records the commit and how many of how many. Mutants that
were killed stay killed (tests are added, not removed, between the runs: a whole new run
settles any doubt). Like tools/mutation.py, it mutates files in place: a clean checkout only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.mutation import MODULES, RESULTS, result_key, test_command, write_report  # noqa: E402


def mutated(lines: list[str], line: int, diff: str) -> list[str] | None:
    """``lines`` (the module, 1-based ``line``) with the survivor's diff applied where the
    removed lines are, at ``line`` or, when code above them moved, at their nearest place;
    None where the module no longer has them."""
    old = [d[1:] for d in diff.splitlines() if d.startswith("-")]
    new = [d[1:] for d in diff.splitlines() if d.startswith("+")]
    places = [i for i in range(len(lines)) if lines[i : i + len(old)] == old]
    if not old or not places:
        return None
    start = min(places, key=lambda i: abs(i - (line - 1)))
    return lines[:start] + new + lines[start + len(old) :]


def recheck(entry: dict, commit: str) -> dict:
    path = REPO / entry["module"]
    original = path.read_text()
    lines = original.splitlines()
    tests = MODULES[entry["module"]]
    kept, killed, stale = [], 0, 0
    try:
        for survivor in entry["survivors"]:
            changed = mutated(lines, survivor["line"], survivor["diff"])
            if changed is None:
                stale += 1
                kept.append(survivor)
                continue
            path.write_text("\n".join(changed) + "\n")
            try:
                # No bytecode written: a mutant's .pyc must never stand in for the source
                # (cosmic-ray's own runs set the same).
                run = subprocess.run(test_command(tests), cwd=REPO, capture_output=True,
                                     timeout=120, env={**os.environ,
                                                       "PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip
                passed = run.returncode == 0
            except subprocess.TimeoutExpired:  # the tests hang on it: CI would fail, so killed
                passed = False
            if passed:
                kept.append(survivor)
            else:
                killed += 1
    finally:
        path.write_text(original)
    outcomes = dict(entry["outcomes"])
    outcomes["killed"] = outcomes.get("killed", 0) + killed
    outcomes["survived"] = outcomes.get("survived", 0) - killed
    judged = outcomes["killed"] + outcomes["survived"]
    rechecked = {"commit": commit[:10], "survivors": len(entry["survivors"]), "killed": killed}
    if stale:
        rechecked["not_applied"] = stale  # the code moved: a whole new run is needed for them
    return {
        **entry,
        "outcomes": outcomes,
        "kill_rate": round(outcomes["killed"] / judged, 3) if judged else None,
        "survivors": kept,
        "rechecked": rechecked,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="MODULE, or MODULE#F1,F2 for a --functions run")
    args = parser.parse_args()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, cwd=REPO).stdout  # fmt: skip
    own = {"tools/results/mutation.json", "tools/results/mutation.md"}
    if any(line[3:] not in own for line in dirty.splitlines()):
        sys.exit("tools/mutation_recheck.py: commit or stash your changes first")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=REPO, check=True).stdout.strip()  # fmt: skip
    report = json.loads((RESULTS / "mutation.json").read_text())
    entries = {result_key(r): r for r in report["modules"]}
    for module in args.modules:
        entries[module] = recheck(entries[module], commit)
        write_report(list(entries.values()), report["commit"])
        found = entries[module]["rechecked"]
        print(f"{module}: {found['killed']} of {found['survivors']} survivors now killed; "
              f"kill rate {entries[module]['kill_rate']}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
