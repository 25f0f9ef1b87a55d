#!/usr/bin/env bash
# No-op --check of converged lab nodes over SSH, tuned ansible.cfg vs Ansible's defaults.
# See benchmarks/README.md. Arguments go to benchmarks/fleet_check.py (--sizes, --playbook...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "${BLACKWELL_VENV:-$root/.venv}/bin/python" "$root/benchmarks/fleet_check.py" "$@"
