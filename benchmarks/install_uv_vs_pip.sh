#!/usr/bin/env bash
# uv versus pip installing the same pinned set (install-set.txt) from the same local wheelhouse
# into fresh venvs, several runs each, as the sglang_install role does on an air-gapped node.
# Prints each run's wall time, the medians and the pip/uv ratio.
#
#   benchmarks/install_uv_vs_pip.sh              # 3 runs, bytecode compiled (the role's default)
#   RUNS=5 COMPILE=0 benchmarks/install_uv_vs_pip.sh
#
# uv is timed twice: "cold" with an empty cache each run (a fresh node), "warm" with a cache one
# untimed run filled (a re-install on the same node). pip keeps no cache for local wheels.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
compile=${COMPILE:-1}
python=${BENCH_PYTHON:-python3}
wheelhouse=${BENCH_WHEELHOUSE:-$root/.cache/bench/wheelhouse}
set_file=$root/benchmarks/install-set.txt
tools_pins=(pip==26.3 uv==0.13.9)

work=$(mktemp -d /var/tmp/install-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The wheelhouse is filled once from PyPI; the timed runs never touch the network.
mkdir -p "$wheelhouse"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  --dest "$wheelhouse" -r "$set_file" "${tools_pins[@]}" 2>/dev/null

"$python" -m venv "$work/tools"
"$work/tools/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$wheelhouse" "${tools_pins[@]}"
pip_bin=$work/tools/bin/pip
uv_bin=$work/tools/bin/uv

common=(--no-index --find-links "$wheelhouse" --no-deps -r "$set_file")
if [ "$compile" = 1 ]; then pip_compile=(); uv_compile=(--compile-bytecode); else pip_compile=(--no-compile); uv_compile=(); fi

install() { # tool target-venv cache
  case $1 in
    pip) "$pip_bin" --python "$2/bin/python" install --quiet --disable-pip-version-check "${pip_compile[@]}" "${common[@]}" ;;
    uv) UV_CACHE_DIR=$3 "$uv_bin" pip install --quiet --python "$2/bin/python" "${uv_compile[@]}" "${common[@]}" ;;
  esac
}

timed() { # label tool cache
  local target=$work/venv-$1
  rm -rf "$target"
  "$python" -m venv --without-pip "$target"
  local start end
  start=$(date +%s.%N)
  install "$2" "$target" "$3"
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.2f}')"
}

# Fill the warm cache once, untimed.
"$python" -m venv --without-pip "$work/venv-prime"
install uv "$work/venv-prime" "$work/uv-warm-cache"

declare -A times
for i in $(seq 1 "$runs"); do
  pip_s=$(timed pip pip "")
  cold_s=$(timed uv-cold uv "$work/uv-cold-cache-$i")
  warm_s=$(timed uv-warm uv "$work/uv-warm-cache")
  times[pip]+="$pip_s "
  times[uv_cold]+="$cold_s "
  times[uv_warm]+="$warm_s "
  echo "run $i: pip $pip_s s, uv cold $cold_s s, uv warm $warm_s s"
done >&2

python3 - "$runs" "$compile" "$(grep -cv '^#' "$set_file")" "${times[pip]}" "${times[uv_cold]}" "${times[uv_warm]}" <<'PY'
import statistics
import sys

runs, compile_, packages, *series = sys.argv[1:]
pip, cold, warm = ([float(x) for x in s.split()] for s in series)
med = {name: statistics.median(v) for name, v in (("pip", pip), ("uv cold", cold), ("uv warm", warm))}
print(f"{packages} packages, {runs} runs each, bytecode {'compiled' if compile_ == '1' else 'not compiled'}")
for name, values in (("pip", pip), ("uv cold", cold), ("uv warm", warm)):
    print(f"{name:8} median {med[name]:6.2f} s  runs: {' '.join(f'{v:.2f}' for v in values)}")
print(f"pip / uv cold: {med['pip'] / med['uv cold']:.1f}x   pip / uv warm: {med['pip'] / med['uv warm']:.1f}x")
PY
