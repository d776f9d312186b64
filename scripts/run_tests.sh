#!/usr/bin/env bash
# Runs the Criterion suite of one build folder through meson and prints a
# closing line "tests: N passed, N failed" summed from Criterion's synthesis.
set -u
build=${1:-build}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# A malloc too large for AddressSanitizer returns NULL, as it would without
# it, so that the tests of out-of-memory refusals run in the sanitizer build.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
# The sanitizer build runs with uninitialised tensors filled with 0xFF (NaN):
# a kernel that reads an output it was meant to write whole then fails a test.
case "$build" in *asan*) export TG_POISON_EMPTY=${TG_POISON_EMPTY:-1} ;; esac
# Under TG_MAX_ISA the kernels above the bound count as missing: their tests
# are skipped with the reason a CPU without them gives.
if [ -n "${TG_MAX_ISA:-}" ]; then
  echo "TG_MAX_ISA=$TG_MAX_ISA: kernels above it are skipped as on a CPU without them"
fi
meson test -C "$build" --print-errorlogs --num-processes 2
rc=$?
# Criterion 2.4.1 (Debian 12) evaluates its gt() assertion as >= in C
# (Snaipe/Criterion#473, fixed after 2.4.1), so a test written with it may
# pass when it should fail: the suite writes a > b as a plain condition.
root=$(cd "$(dirname "$0")/.." && pwd)
if grep -nE '(^|[^A-Za-z0-9_.>])gt\(' "$root"/tests/*.c "$root"/tests/fuzz/*.c >&2; then
  echo "tests use Criterion's gt(), which is >= in 2.4.1: write cr_assert(a > b, ...)" >&2
  rc=1
fi
log="$build/meson-logs/testlog.txt"
passed=0; failed=0
if [ -f "$log" ]; then
  while read -r p f c; do
    passed=$((passed + p)); failed=$((failed + f + c))
  done < <(sed -n 's/.*Synthesis: Tested: [0-9]* | Passing: \([0-9]*\) | Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2 \3/p' "$log")
fi
# Criterion counts a test whose worker only leaked as passed: a sanitizer
# report anywhere in the log fails the run.
if [ -f "$log" ] && grep -qE "ERROR: (Leak|Address)Sanitizer|runtime error:" "$log"; then
  echo "sanitizer reports found in $log:" >&2
  grep -nE "ERROR: (Leak|Address)Sanitizer|runtime error:" "$log" | head -20 >&2
  rc=1; failed=$((failed + 1))
fi
# What this CPU or build does not run, with the reasons the tests print
# (helpers.c): skipped tests counted per suite and reason, then the parts of
# passing tests that were left out.
if [ -f "$log" ]; then
  awk '/^\[SKIP\] / { line = substr($0, 8); split(line, p, "::"); i = index(line, ": ");
                       n[p[1] ": " substr(line, i + 2)]++ }
       /^\[NOT RUN\] / { m[substr($0, 11)] = 1 }
       END { for (k in n) { split(k, q, ": "); r = substr(k, length(q[1]) + 3);
                            printf "  skipped, %d in %s: %s\n", n[k], q[1], r }
             for (k in m) printf "  not run in %s\n", k }' "$log" | sort > "$build/meson-logs/not_run.txt"
  if [ -s "$build/meson-logs/not_run.txt" ]; then
    echo "not run on this machine or build:"
    cat "$build/meson-logs/not_run.txt"
  fi
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "tests ($build): $passed passed, $failed failed"
exit "$rc"
