#!/usr/bin/env bash
# CI as on a new machine: a fresh clone of this repository's HEAD (or REF) into a temporary folder, a new
# virtual environment (.ci/run makes it), and the jaxcore data and XLA compilation caches pointed at empty
# folders; then .ci/run, each part timed. The log, the per-test durations and the smoke run's results are
# copied to OUT (default results/fresh-ci-<time>), and the budget table is printed from them.
#
#   scripts/fresh_ci.sh [REF] [OUT]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
out=${2:-$repo/results/fresh-ci-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/jaxcore-fresh-ci.XXXXXX")
trap 'rm -rf "$work"' EXIT
git clone --quiet --no-hardlinks "$repo" "$work/jaxcore"
git -C "$work/jaxcore" checkout --quiet "$(git -C "$repo" rev-parse "$ref")"
mkdir -p "$work/cache" "$work/xdg"
export JAXCORE_CACHE="$work/cache" XDG_CACHE_HOME="$work/xdg" CI=true
echo "fresh CI of $(git -C "$work/jaxcore" rev-parse --short HEAD) in $work; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" \
  | tee "$out/ci.log"
start=$(date +%s)
set +e
(cd "$work/jaxcore" && bash .ci/run < /dev/null) 2>&1 | tee -a "$out/ci.log"
code=${PIPESTATUS[0]}
set -e
echo "fresh CI exit $code in $(( $(date +%s) - start )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)" \
  | tee -a "$out/ci.log"
cp -r "$work/jaxcore/results/ci-tests" "$out/" 2>/dev/null || true
cp "$work/jaxcore/results/ci-smoke/results.json" "$out/smoke-results.json" 2>/dev/null || true
exit "$code"
