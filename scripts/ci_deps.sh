#!/usr/bin/env bash
# CI step (issue 34): install what the tests need to run instead of skipping. Under CI=true
# a test whose tool is missing fails (tests/common/mod.rs `skip_unless_ci`), so `.ci/run`
# calls this first:
#   GNU parallel  tests/sweep.rs gnu_parallel_runs_the_emitted_job_file
#   python3       tests/scenes.rs bench_frontier_analysis_self_test
# (the anchor meshes are not installed: CI copies shared/ beside the clone, and the three
# anchor-mesh tests fail under CI=true when ../shared/anchor-meshes is absent).
set -euo pipefail
need=()
# (moreutils ships another `parallel`; the test needs GNU's)
parallel --version 2>/dev/null | grep -q "GNU parallel" || need+=(parallel)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
parallel --version | head -1
