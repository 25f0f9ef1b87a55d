#!/usr/bin/env bash
# The whole test suite: lint, ansible-test sanity, unit and integration tests, molecule
# scenarios in the local podman lab. Extra arguments go to pytest, e.g.
#   tools/test.sh -m 'not lab'        # everything that needs no container
#   tools/test.sh tests/unit -k capmap
#   tools/test.sh --costs tests/costs.json   # the whole run, then each unit's seconds written there
# Test files run side by side in BLACKWELL_TEST_WORKERS processes (default 3; 0 runs them in
# this one), longest first by tests/costs.json: each lab test has its own containers, ports and
# state, and the scripts that build what they share take a lock.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/bootstrap.sh"
cd "$root"
# Once here, not by each test process at once.
tools/collection-path.sh >/dev/null
exec "${BLACKWELL_VENV:-$root/.venv}/bin/python" -m pytest \
  -n "${BLACKWELL_TEST_WORKERS:-3}" --dist loadfile "$@"
