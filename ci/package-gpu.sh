#!/usr/bin/env bash
# Builds the CUDA configuration here and bundles what the nightly GPU job runs into one folder
# (default .gpu-carry/, git-ignored) for a bare GPU machine that has the CUDA toolkit but no
# Debian dev packages and no network: the binaries, the non-system shared libraries they need
# (OpenBLAS, libgfortran, Google Benchmark), RPATH set to $ORIGIN plus the toolkit's lib dirs;
# and what `leakbound watch` injects (lib/: the preload, the NVTX and CUDA injections;
# share/leakbound/python: the Python module), where leakbound finds them next to bin/.
# Usage: ci/package-gpu.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.gpu-carry}
bash ci/install_deps.sh
if ! command -v patchelf >/dev/null; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get install -y -qq patchelf
fi
cmake --preset default -DLEAKBOUND_CUDA=ON >/dev/null
cmake --build --preset default -j "$(nproc)"
rm -rf "$dest"
mkdir -p "$dest/bin"
bins=(harness/leakbound runtime/tests/runtime_tests runtime/cuda/cuda_backend_tests
      cupti/cupti_ledger_tests harness/bench/bench_leakbound)
for b in "${bins[@]}"; do
  [[ -x build/default/$b ]] && cp "build/default/$b" "$dest/bin/"
done
mkdir -p "$dest/lib" "$dest/share/leakbound"
for lib in watch/preload/libleakbound_preload.so watch/nvtx/libleakbound_nvtx_inject.so \
           watch/inject/libleakbound_inject.so; do
  [[ -f build/default/$lib ]] && cp "build/default/$lib" "$dest/lib/"
done
[[ -d build/default/watch/python ]] && cp -r build/default/watch/python "$dest/share/leakbound/"
# Shared libraries that are neither glibc/libstdc++ nor part of the CUDA toolkit, as the build
# tree's binaries resolve them (their RUNPATHs are relative to where they were built: the copies
# in $dest/bin would not find libleakbound_heap.so). A library not found stops the packing.
for b in "${bins[@]}"; do
  [[ -x build/default/$b ]] || continue
  if ldd "build/default/$b" | grep -q "not found"; then
    echo "package-gpu: build/default/$b needs a library that is not found:" >&2
    ldd "build/default/$b" | grep "not found" >&2
    exit 1
  fi
  ldd "build/default/$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
      libcuda.so*|libcudart*|libcublas*|libcupti*|libnvrtc*|libnvJitLink*) ;;
      *) cp -n "$lib" "$dest/bin/" ;;
    esac
  done
done
for f in "$dest"/bin/* "$dest"/lib/*.so; do
  patchelf --set-rpath '$ORIGIN:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/targets/x86_64-linux/lib' "$f" 2>/dev/null || true
done
git rev-parse HEAD >"$dest/COMMIT"
du -sh "$dest"
ls -la "$dest/bin"
