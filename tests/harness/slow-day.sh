#!/usr/bin/env bash
# Runs a command with one of the machine's cores taken by a busy process, as on a day this
# shared machine runs at half speed (tests/run.sh does the same with SLURMSCALE_SLOW_DAY=1):
#
#   tests/harness/slow-day.sh cargo bench --bench load
source "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || die "usage: slow-day.sh COMMAND [ARGS...]"
busy=$(take_a_core)
trap 'release_core "$busy"' EXIT
say "one core taken by process $busy while: $*"
"$@"
