#!/usr/bin/env bash
# The whole test suite: lint, ansible-test sanity, unit and integration tests, molecule
# scenarios in the local podman lab. Extra arguments go to pytest, e.g.
#   tools/test.sh -m 'not lab'        # everything that needs no container
#   tools/test.sh tests/unit -k capmap
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/bootstrap.sh"
cd "$root"
exec "${BLACKWELL_VENV:-$root/.venv}/bin/python" -m pytest "$@"
