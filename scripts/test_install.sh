#!/usr/bin/env bash
# Builds tests/consumer/consumer.c out of tree as a user would, and runs it:
#   1. against the build tree, with the uninstalled pkg-config file;
#   2. against `meson install` into a temporary prefix, via pkg-config,
#      linked with the shared library and then with the static one;
#   3. the installed `tapegrad` tool run from that prefix with no
#      LD_LIBRARY_PATH: its RUNPATH must find the installed library;
#   4. by CMake with find_package(tapegrad) against that prefix
#      (tests/consumer/CMakeLists.txt), and a version it must refuse.
# With --subproject (make test-minimal) instead: a meson project holding
# tapegrad as a subproject, configured with -Dpng=disabled -Dplot=disabled,
# so that the library builds and runs without libpng and cairo.
# Usage: scripts/test_install.sh BUILD_DIR | scripts/test_install.sh --subproject
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
step() { printf '%s\n' "test_install: $*"; }

if [ "${1:-}" = --subproject ]; then
  mkdir -p "$tmp/proj/subprojects"
  cp "$root/tests/consumer/consumer.c" "$root/tests/consumer/meson.build" "$tmp/proj/"
  ln -s "$root" "$tmp/proj/subprojects/tapegrad"
  step "meson subproject with -Dpng=disabled -Dplot=disabled"
  meson setup "$tmp/proj/build" "$tmp/proj" -Dtapegrad:png=disabled -Dtapegrad:plot=disabled \
    >"$tmp/setup.log" || { cat "$tmp/setup.log"; exit 1; }
  ninja -C "$tmp/proj/build" >"$tmp/build.log" || { tail -50 "$tmp/build.log"; exit 1; }
  if ldd "$tmp/proj/build/consumer" | grep -E 'libpng|libcairo'; then
    echo "test_install: the minimal build links libpng or cairo" >&2; exit 1
  fi
  out=$("$tmp/proj/build/consumer")
  echo "$out"
  case "$out" in *"png no, plot no"*) ;; *) echo "test_install: expected no png, no plot" >&2; exit 1 ;; esac
  exit 0
fi

build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
# A sanitizer build's library needs its runtime in the program too.
san=$(meson introspect "$build" --buildoptions |
      python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"))')
sanflag=
if [ "$san" != none ]; then sanflag="-fsanitize=$san"; cc="$cc $sanflag"; fi

step "against the build tree (meson-uninstalled/tapegrad-uninstalled.pc)"
export PKG_CONFIG_PATH="$build/meson-uninstalled"
# shellcheck disable=SC2046
$cc -std=c17 -o "$tmp/consumer_uninstalled" "$root/tests/consumer/consumer.c" \
  $(pkg-config --cflags --libs tapegrad)
LD_LIBRARY_PATH="$build" "$tmp/consumer_uninstalled"

step "meson install into a temporary prefix"
meson install -C "$build" --no-rebuild --destdir "$tmp/dest" >"$tmp/install.log" \
  || { cat "$tmp/install.log"; exit 1; }
pc=$(find "$tmp/dest" -name tapegrad.pc | head -1)
[ -n "$pc" ] || { echo "test_install: no tapegrad.pc installed" >&2; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
export PKG_CONFIG_PATH=$(dirname "$pc")
pcflags() { pkg-config --define-variable=prefix="$tmp/dest$prefix" "$@" tapegrad; }
libdir=$(pcflags --variable=libdir)
for h in tapegrad.h scope.h export.h; do
  [ -f "$(pcflags --variable=includedir)/tapegrad/$h" ] || { echo "missing header $h" >&2; exit 1; }
done
[ -f "$libdir/libtapegrad.a" ] || { echo "test_install: no libtapegrad.a in $libdir" >&2; exit 1; }

step "the installed tapegrad finds the installed library (RUNPATH)"
tool="$tmp/dest$prefix/bin/tapegrad"
[ -x "$tool" ] || { echo "test_install: no bin/tapegrad under the prefix" >&2; exit 1; }
runpath=$(readelf -d "$tool" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
# the configured libdir, and one relative to the tool for a staged or moved prefix
case ":$runpath:" in *":${libdir#"$tmp/dest"}:"*) ;; *)
  echo "test_install: bin/tapegrad's RUNPATH '$runpath' lacks ${libdir#"$tmp/dest"}" >&2; exit 1 ;;
esac
env -u LD_LIBRARY_PATH "$tool" --version || {
  echo "test_install: the installed bin/tapegrad does not start (RUNPATH '$runpath')" >&2; exit 1; }
env -u LD_LIBRARY_PATH "$tool" ops >/dev/null

step "shared library via pkg-config"
# shellcheck disable=SC2046
$cc -std=c17 -o "$tmp/consumer_shared" "$root/tests/consumer/consumer.c" $(pcflags --cflags --libs)
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_shared"

if command -v cmake >/dev/null; then
  step "CMake: find_package(tapegrad) from the prefix"
  version=$(sed -n 's/^Version: //p' "$pc")
  cmake_conf() { # $1 build dir, $2 the version asked
    cmake -S "$root/tests/consumer" -B "$1" -DCMAKE_PREFIX_PATH="$tmp/dest$prefix" \
      -DWANT_VERSION="$2" -DCMAKE_C_COMPILER="${CC:-cc}" -DCMAKE_C_FLAGS="$sanflag"
  }
  cmake_conf "$tmp/cmake" "$version" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
  cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
  # CMake's build RPATH points at the imported library: no LD_LIBRARY_PATH
  env -u LD_LIBRARY_PATH "$tmp/cmake/consumer"
  # a later minor version than the one installed must not be accepted
  newer=$(echo "$version" | awk -F. '{print $1 "." $2 + 1}')
  if cmake_conf "$tmp/cmake-newer" "$newer" >"$tmp/cmake-newer.log" 2>&1; then
    echo "test_install: find_package(tapegrad $newer) accepted version $version" >&2; exit 1
  fi
  grep -q "$version" "$tmp/cmake-newer.log" || {
    cat "$tmp/cmake-newer.log"; echo "test_install: CMake did not name version $version" >&2
    exit 1; }
else
  step "SKIP CMake: cmake is not installed (Debian package cmake)"
fi

step "static library via pkg-config --static"
libs=$(pcflags --libs --static | sed "s|-ltapegrad|$libdir/libtapegrad.a|")
# shellcheck disable=SC2086
$cc -std=c17 -o "$tmp/consumer_static" "$root/tests/consumer/consumer.c" $(pcflags --cflags) $libs
if ldd "$tmp/consumer_static" | grep -q libtapegrad; then
  echo "test_install: the static link still uses libtapegrad.so" >&2; exit 1
fi
"$tmp/consumer_static"
step "ok"
