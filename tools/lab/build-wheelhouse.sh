#!/usr/bin/env bash
# Fills the lab's wheelhouse with the real wheels the labs install offline: the SGLang releases
# the sglang_patch scenario upgrades between, uv (the installer the sglang_install role
# bootstraps) and huggingface_hub with its dependencies. The container runs Debian 12's python3.11, so platform wheels are fetched for
# cp311 manylinux x86_64 whatever Python runs this script. Only the packages themselves
# (--no-deps): the scenario installs SGLang with sglang_install_no_deps, since a full SGLang
# is 4 to 5 GB of torch and CUDA libraries that no container here can use.
#
#   tools/lab/build-wheelhouse.sh            # prints the wheelhouse directory
#   LAB_WHEELHOUSE=/srv/wh tools/lab/build-wheelhouse.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${LAB_WHEELHOUSE:-$root/.cache/lab/wheelhouse}
python=${BLACKWELL_PYTHON:-python3}
# Release A indexes the dicts directly (KeyError: 12 on SM120); release B uses .get() and
# ships cp311 platform wheels; 0.5.23 is the newest, whose FlashInfer fusion refuses SM120 and
# which ships the PCIe all-reduce (the lab's LAB_SGLANG_VERSION=0.5.23).
packages=(sglang==0.5.8 sglang==0.5.18 sglang==0.5.23 uv==0.13.9)
# huggingface_hub and what it needs, as a node's release venv holds them: the model staging lab
# test downloads through it from a stand-in hub (tests/stand_in_hub.py).
packages+=(huggingface_hub==0.36.0 hf_xet==1.8.0 filelock==4.3.2 fsspec==2026.9.0 packaging==26.4
  pyyaml==6.0.4 requests==2.34.2 certifi==2026.10.19.post1 charset_normalizer==3.5.3 idna==3.20
  urllib3==2.8.0 tqdm==4.70.1 typing_extensions==4.16.0)
# SGLang's router, smg (the Shepherd Model Gateway), and what it needs, for the router lab's
# router node (tests/integration/test_router_fleet.py).
packages+=(smg==1.13.0 grpcio==1.85.4 grpcio-health-checking==1.85.1 protobuf==7.36.2)
# The router's last release under its old name, sglang-router 0.3.2, and what it needs: the router
# lab migrates a router node from it to smg.
packages+=(sglang-router==0.3.2 setproctitle==1.3.8 aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0
  attrs==26.1.0 frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1 orjson==3.13.0 uvicorn==0.55.0
  click==8.5.1 h11==0.16.0 fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4 pydantic_core==2.50.5
  annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5 anyio==4.16.0 opentelemetry-api==1.45.3
  idna==3.21)

# Whatever lies here is installed on the nodes as root: only a directory the caller alone controls.
# shellcheck source=tools/lab/owned-dir.sh
. "$root/tools/lab/owned-dir.sh"
owned_dir "$dest"
lock_script "$dest.lock" "$@"
for spec in "${packages[@]}"; do
  name=${spec%%==*}
  version=${spec#*==}
  # Wheel file names spell a project's name with underscores (sglang-router: sglang_router-...).
  if compgen -G "$dest/${name//-/_}-${version}-*.whl" >/dev/null; then
    continue
  fi
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    --dest "$dest" "$spec" >&2
done
echo "$dest"
