"""Ship a judge audit with the package: `python scripts/ship_audit.py AUDIT_DIR NAME --command CMD --machine M`.

Writes gamut_hf/data/judge-audit/measured/NAME.json (the folder's audit.json with the command that
produced it, the machine and the date), which `gamut run`, the report and the Space then show beside
every score of that judge (matched by its fingerprint and the judge prompt version)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from gamut_hf.atomic import write_text
from gamut_hf.evaluation.audit import AUDIT_FILE, MEASURED_FOLDER, MeasuredAudit, load_audit_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit_dir")
    parser.add_argument("name")
    parser.add_argument("--command", required=True, help="the gamut judge-audit command that produced it")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    audit = load_audit_results(args.audit_dir)
    if audit is None:
        raise SystemExit(f"{args.audit_dir}: no audit.json")
    if Path(audit.labels).resolve() != AUDIT_FILE:
        raise SystemExit(f"{args.audit_dir}: measured on {audit.labels}; only audits of the built-in gold are shipped")
    audit = audit.model_copy(update={"labels": "gamut_hf/data/judge-audit/audit.jsonl"})  # no path of this machine
    measured = MeasuredAudit(command=args.command, machine=args.machine, date=args.date, audit=audit)
    path = Path(MEASURED_FOLDER) / f"{args.name}.json"
    write_text(path, measured.model_dump_json(indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
