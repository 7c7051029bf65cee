#!/usr/bin/env python3
"""Steady-state cost of the job tracker's cheap requests on a harness Slurm.

  steady.py FLAVOR SECONDS [poll|idle] [POLL_S]

A submitter queues one new job a second (sbatch, cpu partition, stays pending). In `poll`
mode a poller does what the tracker does every POLL_S (default 2): one /diag, then
/job/{id} for each id after the highest known until MISSES (2) unknown ids in a row, and two
held-job reviews (/job/{id} of ids given in $STEADY_HELD, comma-separated). `idle` runs the
submitter only (the floor). Prints slurmrestd and slurmctld CPU seconds per minute
(/proc/PID/stat of the pids slurm.sh recorded) and the requests made.
"""
import json, os, subprocess, sys, time, urllib.request, urllib.error

HZ = os.sysconf("SC_CLK_TCK")
flavor, seconds = sys.argv[1], float(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "poll"
poll_s = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
here = os.path.dirname(os.path.abspath(__file__))
e = {}
for line in subprocess.run([os.path.join(here, "slurm.sh"), flavor, "env"], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    if line.startswith("export ") and "SLURM_JWT=" not in line:
        k, v = line[7:].split("=", 1)
        e[k] = v.strip('"')
token = open(e["HARNESS_JWT_FILE"]).read().strip()
piddir = os.path.join(os.path.dirname(e["SLURM_CONF"]), "..", "pids")
pid = {n: open(os.path.join(piddir, n)).read().strip() for n in ("slurmrestd", "slurmctld")}
v = "v0.0.38" if flavor == "22.05" else "v0.0.42"
held = [int(x.split("_")[0]) for x in os.environ.get("STEADY_HELD", "").split(",") if x]


def cpu(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ


def get(path):
    req = urllib.request.Request(e["SLURM_REST_URL"] + path, headers={
        "X-SLURM-USER-NAME": e["SLURM_USER"], "X-SLURM-USER-TOKEN": token})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def job_exists(i):
    st, body = get(f"/slurm/{v}/job/{i}")
    if st != 200:
        return False
    try:
        return bool(json.loads(body).get("jobs"))
    except Exception:
        return False


senv = dict(os.environ, SLURM_CONF=e["SLURM_CONF"])
senv.pop("SLURM_JWT", None)
sbatch = os.path.join(e["SLURM_BIN"], "sbatch")
# highest id now: submit one job
out = subprocess.run([sbatch, "--parsable", "-p", "cpu", "-t", "30", "-o", "/dev/null", "-J", "steady",
                      "--wrap", "sleep 30"], capture_output=True, text=True, env=senv).stdout.strip()
maxid = int(out.split(";")[0])
counts = {"diag": 0, "job_found": 0, "job_miss": 0, "review": 0, "submitted": 0}
c0 = {n: cpu(p) for n, p in pid.items()}
t0 = time.time()
next_submit, next_poll, ri = t0, t0, 0
while time.time() - t0 < seconds:
    now = time.time()
    if now >= next_submit:
        subprocess.Popen([sbatch, "-Q", "-p", "cpu", "-t", "30", "-o", "/dev/null", "-J", "steady",
                          "--wrap", "sleep 30"], env=senv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        counts["submitted"] += 1
        next_submit += 1.0
    if mode == "poll" and now >= next_poll:
        get(f"/slurm/{v}/diag"); counts["diag"] += 1
        misses, i = 0, maxid + 1
        while misses < 2:
            if job_exists(i):
                counts["job_found"] += 1; maxid = i; misses = 0
            else:
                counts["job_miss"] += 1; misses += 1
            i += 1
        for _ in range(2 if held else 0):
            get(f"/slurm/{v}/job/{held[ri % len(held)]}"); ri += 1; counts["review"] += 1
        next_poll += poll_s
    time.sleep(max(0.0, min(next_submit, next_poll if mode == "poll" else next_submit) - time.time()))
el = time.time() - t0
c1 = {n: cpu(p) for n, p in pid.items()}
print(json.dumps({"flavor": flavor, "mode": mode, "seconds": round(el, 1), "poll_s": poll_s,
                  "restd_cpu_s_per_min": round((c1["slurmrestd"] - c0["slurmrestd"]) * 60 / el, 2),
                  "ctld_cpu_s_per_min": round((c1["slurmctld"] - c0["slurmctld"]) * 60 / el, 2),
                  **counts}))
