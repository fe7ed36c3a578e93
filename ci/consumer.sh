#!/usr/bin/env bash
# leakbound consumed as a dependency, the three ways the README gives, each checked by running
# examples/consumer's tests: Clean.* must pass; every Leaking.* must FAIL with the class
# (unbounded-growth) in its output. A leaking test that skips says why (e.g. the exact host heap
# is not counting in this build); one listed as pending below may pass, and is noted.
#   1. cmake --install into a temporary prefix, the example built with find_package(leakbound);
#      the example is also compiled by hand with pkg-config (leakbound-gtest.pc).
#      The same tree as a Debian package (cpack -G DEB), unpacked, and the example built on it.
#   2. the example built with leakbound as a subproject through FetchContent (local SOURCE_DIR:
#      no network), which builds leakbound's libraries again (no tests, no CLI, CUDA off).
# Usage: ci/consumer.sh [BUILD_DIR]. With a configured BUILD_DIR (ci/test.sh passes build/default)
# its package targets are brought up to date and installed from there; without one a Release,
# CUDA-off, test-less build is made in build/consumer-package. The last line is the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${LEAKBOUND_JOBS:-$(nproc)}
build=${1:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/leakbound-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failures=()
notes=()
# LEAKBOUND_CONSUMER_PENDING="Leaking.X ...": leaking tests leakbound is known not to catch yet
# (a counter not judged in this build): if one passes it is noted, not failed. Empty by default.
pending=" ${LEAKBOUND_CONSUMER_PENDING-} "

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# check_tests ROUTE BINARY: clean tests pass, leaking tests fail with the class in the output.
check_tests() {
  local route=$1 bin=$2 log
  log=$work/$route.clean.log
  if "$bin" --gtest_filter='Clean.*' >"$log" 2>&1; then
    echo "[$route] Clean.*: $(grep -c '^\[       OK \]' "$log") passed"
  else
    cat "$log"
    failures+=("$route: a clean test failed")
  fi
  local test
  for test in $("$bin" --gtest_list_tests --gtest_filter='Leaking.*' | awk '
      /^[^ ]/ { suite = $1 } /^  / { print suite $1 }'); do
    log=$work/$route.$test.log
    if "$bin" --gtest_filter="$test" >"$log" 2>&1; then
      if grep -q '^\[  SKIPPED \]' "$log"; then
        local reason
        reason=$(grep -A1 ': Skipped$' "$log" | tail -1)
        echo "[$route] $test: SKIPPED ($reason)"
        notes+=("$route $test skipped: $reason")
      elif [[ $pending == *" $test "* ]]; then
        echo "[$route] $test: NOT CAUGHT YET (pending: the leak passes unnoticed)"
        notes+=("$route $test not caught yet (listed as pending in ci/consumer.sh)")
      else
        cat "$log"
        failures+=("$route: $test passed, but it leaks (the leak was not caught)")
      fi
    elif grep -q 'unbounded-growth' "$log"; then
      echo "[$route] $test: failed as expected, with unbounded-growth: $(grep -m1 -oE '[^ ]+ grew [^:]+' "$log")"
      if [[ $pending == *" $test "* ]]; then
        notes+=("$route $test is caught now: remove it from 'pending' in ci/consumer.sh")
      fi
    else
      cat "$log"
      failures+=("$route: $test failed without 'unbounded-growth' in its message")
    fi
  done
}

# --- the package: from the given build dir, or a fresh lean one.
start=$(now)
if [[ -n $build && -f $build/CMakeCache.txt ]]; then
  echo "=== [consumer] package from $build"
else
  build=$root/build/consumer-package
  echo "=== [consumer] package: configuring a lean build in $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEAKBOUND_CUDA=OFF \
    -DLEAKBOUND_BUILD_TESTS=OFF -DLEAKBOUND_BUILD_BENCH=OFF -DLEAKBOUND_BUILD_CLI=ON \
    >"$work/package.configure.log" 2>&1 || { cat "$work/package.configure.log"; exit 1; }
fi
cmake --build "$build" -j "$jobs" --target leakbound_package >"$work/package.build.log" 2>&1 || {
  tail -40 "$work/package.build.log"; exit 1; }
package_build_s=$(elapsed "$start")

# --- 1. installed prefix + find_package, and pkg-config.
start=$(now)
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || {
  cat "$work/install.log"; exit 1; }
install_s=$(elapsed "$start")
"$prefix/bin/leakbound" list >/dev/null  # the installed CLI starts (finds libleakbound_heap.so)
# The installed `watch` finds its preload and its Python folder: --step-on marks the steps of a
# Python program (json.dumps, no torch needed); the job passes when each result is dropped, and
# is judged growing (exit 1) when the program keeps them all in a list.
if [[ -x /usr/bin/python3 ]]; then
  installed_watch() {  # CODE PYTHON_SOURCE
    local rc=0
    "$prefix/bin/leakbound" watch --out "$work/watch-installed" --step-on json.dumps -- \
      /usr/bin/python3 -c "$2" >"$work/watch-installed.log" 2>&1 || rc=$?
    if [[ $rc != "$1" ]]; then
      cat "$work/watch-installed.log"
      failures+=("install: the installed leakbound watch --step-on json.dumps exited $rc, not $1: $2")
    fi
  }
  failed_before=${#failures[@]}
  installed_watch 0 "import json; any(json.dumps(i) is None for i in range(3000))"
  installed_watch 1 "import json; kept = [json.dumps(i) for i in range(3000)]"
  if ((${#failures[@]} == failed_before)); then
    echo "[install] the installed leakbound watch --step-on: a clean Python loop passes, a kept list is caught"
  fi
fi
start=$(now)
cmake -S examples/consumer -B "$work/find_package" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/find_package.configure.log" 2>&1 || {
  cat "$work/find_package.configure.log"; exit 1; }
cmake --build "$work/find_package" -j "$jobs" >"$work/find_package.build.log" 2>&1 || {
  cat "$work/find_package.build.log"; exit 1; }
find_package_s=$(elapsed "$start")
echo "[find_package] cmake --install ${install_s} s + example configure and build ${find_package_s} s"
check_tests find_package "$work/find_package/consumer_tests"

start=$(now)
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# shellcheck disable=SC2046
if c++ -std=c++20 -O1 examples/consumer/leak_bound_test.cc -o "$work/pkg_config_tests" \
     $(pkg-config --cflags --libs leakbound-gtest gtest_main) >"$work/pkg_config.log" 2>&1; then
  echo "[pkg-config] compiled and linked in $(elapsed "$start") s"
  check_tests pkg-config "$work/pkg_config_tests"
else
  cat "$work/pkg_config.log"
  failures+=("pkg-config: the example does not build with pkg-config --cflags --libs leakbound-gtest")
fi

# --- the Debian package (cpack -G DEB) of the same install tree: its files, unpacked with
# dpkg-deb -x (not installed into this machine's /usr), serve as the example's prefix.
start=$(now)
if cpack -G DEB -B "$work/deb" --config "$build/CPackConfig.cmake" >"$work/deb.log" 2>&1 &&
   deb=$(ls "$work"/deb/leakbound_*.deb) && dpkg-deb -x "$deb" "$work/deb-root" &&
   cmake -S examples/consumer -B "$work/deb-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$work/deb-root/usr" >>"$work/deb.log" 2>&1 &&
   cmake --build "$work/deb-build" -j "$jobs" >>"$work/deb.log" 2>&1; then
  echo "[deb] $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) packed, unpacked and built against in $(elapsed "$start") s"
  check_tests deb "$work/deb-build/consumer_tests"
else
  cat "$work/deb.log"
  failures+=("deb: cpack -G DEB or the example built against the package failed")
fi

# --- 2. FetchContent (leakbound's libraries are built again, as a subproject).
start=$(now)
cmake -S examples/consumer -B "$work/fetchcontent" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLEAKBOUND_SOURCE_DIR="$root" >"$work/fetchcontent.configure.log" 2>&1 || {
  cat "$work/fetchcontent.configure.log"; exit 1; }
if [[ -d $work/fetchcontent/_deps/leakbound-build/runtime/tests ]]; then
  failures+=("FetchContent: leakbound's own tests are part of the consumer's build")
fi
cmake --build "$work/fetchcontent" -j "$jobs" >"$work/fetchcontent.build.log" 2>&1 || {
  tail -40 "$work/fetchcontent.build.log"; exit 1; }
fetchcontent_s=$(elapsed "$start")
ctest_count=$(ctest --test-dir "$work/fetchcontent" -N | awk '/Total Tests:/ { print $3 }')
if [[ $ctest_count != 4 ]]; then
  failures+=("FetchContent: the consumer's ctest lists $ctest_count tests, not its own 4")
fi
echo "[fetchcontent] configure and build (leakbound's libraries included) ${fetchcontent_s} s; consumer ctest: $ctest_count tests"
check_tests fetchcontent "$work/fetchcontent/consumer_tests"

echo
for n in "${notes[@]}"; do echo "note: $n"; done
for f in "${failures[@]}"; do echo "FAILED: $f"; done
summary="package build ${package_build_s} s, cmake --install ${install_s} s + example build ${find_package_s} s, FetchContent ${fetchcontent_s} s"
if ((${#failures[@]})); then
  echo "consumer: ${#failures[@]} check(s) FAILED ($summary)"
  exit 1
fi
echo "consumer: find_package, pkg-config, deb and FetchContent OK: clean tests pass, leaking tests fail with the class; ${#notes[@]} note(s) ($summary)"
