#!/usr/bin/env bash
# Installs the Debian packages leakbound builds against. Idempotent: installs only what is missing.
# The CUDA toolkit is not a Debian package here; when /usr/local/cuda exists it is used (AUTO).
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libopenblas-dev
          clang libclang-rt-14-dev   # clang + compiler-rt: the libFuzzer build (ci/fuzz.sh)
          python3-torch libtorch-dev  # real programs `leakbound watch` is tested on (label watch)
          libdw-dev zlib1g-dev        # call sites by function and line; gzip of the pprof profiles
          golang-go                   # `go tool pprof`, which reads `watch --pprof` profiles (a test)
          heaptrack time valgrind)    # the overhead comparison (watch/bench, docs/watch.md; time: each
                                      # run's peak RSS; valgrind: the loop's instructions a pair)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
