"""Offline validation of the Bicep templates (no Bicep CLI or Azure access is needed).

1. Syntax gate: every .bicep file under the folder must parse with pycep and with
   tree-sitter-bicep; any error fails (checkov alone exits 0 on a file it cannot parse).
2. checkov (bicep framework, no downloads): any failed check not waived in
   checkov-waivers.txt fails, as do parsing errors, waivers without a reason and waivers that
   match no finding.

Usage: python validate.py [FOLDER]   (default: this script's folder). Run it with the Python
that has checkov, pycep-parser and tree-sitter-bicep (tests/run installs them).
"""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def syntax_errors(path: Path) -> list[str]:
    from pycep import BicepParser
    import tree_sitter
    import tree_sitter_bicep

    errors = []
    try:
        BicepParser().parse(file_path=path)
    except Exception as error:  # any parse failure, whatever its type
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        errors.append(f"{path}: pycep: {type(error).__name__}: {first}")
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bicep.language()))
    if parser.parse(path.read_bytes()).root_node.has_error:
        errors.append(f"{path}: tree-sitter-bicep: the file does not parse")
    return errors


def read_waivers(path: Path) -> tuple[dict[str, str], list[str]]:
    waivers, errors = {}, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        check, _, reason = line.partition(" ")
        if not reason.strip():
            errors.append(f"{path.name}:{number}: {check} is waived without a reason")
        waivers[check] = reason.strip()
    return waivers, errors


def checkov_findings(folder: Path) -> tuple[list[dict], int]:
    checkov = Path(sys.executable).with_name("checkov")
    run = subprocess.run(
        [str(checkov), "-d", str(folder), "--framework", "bicep", "--skip-download", "-o", "json"],
        capture_output=True,
        text=True,
    )
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        sys.exit(f"checkov gave no JSON report (exit {run.returncode}):\n{run.stderr[-2000:]}")
    reports = report if isinstance(report, list) else [report]
    failed, parsing = [], 0
    for part in reports:
        failed += part.get("results", {}).get("failed_checks", [])
        parsing += part.get("summary", {}).get("parsing_errors", 0)
    return failed, parsing


def main() -> int:
    folder = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE
    templates = sorted(folder.rglob("*.bicep"))
    problems = [] if templates else [f"{folder}: no .bicep files"]
    for template in templates:
        problems += syntax_errors(template)
    if problems:
        print("\n".join(problems))
        print(f"syntax gate: FAILED ({len(problems)} problems)")
        return 1
    print(f"syntax gate: {len(templates)} templates parse")

    waivers, problems = read_waivers(HERE / "checkov-waivers.txt")
    failed, parsing = checkov_findings(folder)
    if parsing:
        problems.append(f"checkov could not parse {parsing} file(s)")
    for finding in failed:
        if finding["check_id"] not in waivers:
            problems.append(
                f"{finding['check_id']} {finding['resource']}: {finding['check_name']} ({finding['file_path']})"
            )
    for check in sorted(set(waivers) - {f["check_id"] for f in failed}):
        problems.append(f"{check} is waived but no longer found: remove the waiver")
    if problems:
        print("\n".join(problems))
        print(f"checkov: FAILED ({len(problems)} problems)")
        return 1
    print(f"checkov: {len(failed)} findings, all waived with a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
