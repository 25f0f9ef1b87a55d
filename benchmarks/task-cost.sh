#!/usr/bin/env bash
# Controller CPU per task and host, and the tasks of a site.yml check. See benchmarks/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "${BLACKWELL_VENV:-$root/.venv}/bin/python" "$root/benchmarks/task_cost.py" "$@"
