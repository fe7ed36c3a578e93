#!/usr/bin/env bash
# Builds the CUDA configuration here and bundles what the nightly GPU job runs into one folder
# (default .gpu-carry/, git-ignored) for a bare GPU machine that has the CUDA toolkit but no
# Debian dev packages and no network: the binaries, the non-system shared libraries they need
# (OpenBLAS, which the CPU device loads, libgfortran, Google Benchmark), RPATH set to $ORIGIN plus the toolkit's lib dirs;
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
copy_needed() {  # copy_needed FILE: what FILE links that the GPU machine may lack, into bin/
  if ldd "$1" | grep -q "not found"; then
    echo "package-gpu: $1 needs a library that is not found:" >&2
    ldd "$1" | grep "not found" >&2
    exit 1
  fi
  ldd "$1" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
      libcuda.so*|libcudart*|libcublas*|libcupti*|libnvrtc*|libnvJitLink*) ;;
      *) cp -n "$lib" "$dest/bin/" ;;
    esac
  done
}
for b in "${bins[@]}"; do
  [[ -x build/default/$b ]] && copy_needed "build/default/$b"
done
# OpenBLAS is not linked but loaded by the CPU device (libopenblas.so.0, dlopen): found through
# the binaries' RUNPATH ($ORIGIN) in bin/, with what it links.
blas=$(ldconfig -p | awk '/libopenblas\.so\.0 /{print $NF; exit}')
[[ -n $blas ]] || { echo "package-gpu: libopenblas.so.0 not found (apt-get install libopenblas0)" >&2; exit 1; }
cp -L "$blas" "$dest/bin/libopenblas.so.0"
copy_needed "$dest/bin/libopenblas.so.0"
for f in "$dest"/bin/* "$dest"/lib/*.so; do
  patchelf --set-rpath '$ORIGIN:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/targets/x86_64-linux/lib' "$f" 2>/dev/null || true
done
git rev-parse HEAD >"$dest/COMMIT"
du -sh "$dest"
ls -la "$dest/bin"
