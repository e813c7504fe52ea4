# env.sh - sourced by the GPU scripts that run Python processes with and
# without the shim: $B (the build, $SM120_BUILD, default build), $sm120 (its
# CLI), $SM120_ORACLE (the frameworks' packages, default $B/oracle,
# exported) and $work, a directory removed at exit that holds the one
# Triton cache ($TRITON_CACHE_DIR) the script's runs share, so that each
# kernel compiles once.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
export SM120_ORACLE="${SM120_ORACLE:-$B/oracle}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"
