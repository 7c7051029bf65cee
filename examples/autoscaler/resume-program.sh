#!/bin/bash
# ResumeProgram for slurm-planned NodeSets (docs/slurm-planned.md). slurmctld runs
# it with the nodes it is powering up; their pods are the autoscaler's business, so all it
# does is tell the autoscaler to read Slurm's nodes now rather than at its next poll: the
# NodeSet is scaled within a moment of slurmctld's decision. Bash alone (no curl needed in
# slurmctld's image); it always exits 0, so a missed call only costs the poll interval.
#
# Edit ADDR (host:port of the autoscaler's Service; slurmctld runs this with an environment
# of its own, so it cannot come from slurmctld's). The Service reaches any replica: a
# standby answers 503, and the next try may reach the leader.
addr=${SLURMSCALE_WAKE:-slurmscale-autoscaler.slurmscale.svc:9342}
host=${addr%:*} port=${addr##*:}
for _ in 1 2 3 4; do
  if exec 3<>"/dev/tcp/$host/$port"; then
    printf 'POST /wake HTTP/1.0\r\nHost: %s\r\nContent-Length: 0\r\n\r\n' "$host" >&3
    read -r -t 2 _ status _ <&3
    exec 3<&-
    [ "${status:-}" = 202 ] && exit 0
  fi 2>/dev/null
  sleep 0.2
done
exit 0
