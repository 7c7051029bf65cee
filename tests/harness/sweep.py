#!/usr/bin/env python3
"""/job/{id} for ids FIRST..FIRST+COUNT-1 with THREADS keep-alive connections; slurmrestd and
slurmctld CPU (/proc of the pids slurm.sh recorded), wall time, jobs found.
  sweep.py FLAVOR FIRST COUNT THREADS"""
import http.client, json, os, subprocess, sys, threading, time, urllib.parse
flavor, first, count, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
here = os.path.dirname(os.path.abspath(__file__))
e = {}
for line in subprocess.run([os.path.join(here, "slurm.sh"), flavor, "env"], capture_output=True, text=True, check=True).stdout.splitlines():
    if line.startswith("export ") and "SLURM_JWT=" not in line:
        k, v = line[7:].split("=", 1); e[k] = v.strip('"')
tok = open(e["HARNESS_JWT_FILE"]).read().strip()
piddir = os.path.join(os.path.dirname(e["SLURM_CONF"]), "..", "pids")
pid = {n: open(os.path.join(piddir, n)).read().strip() for n in ("slurmrestd", "slurmctld")}
v = "v0.0.38" if flavor == "22.05" else "v0.0.42"
u = urllib.parse.urlparse(e["SLURM_REST_URL"])
def cpu(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split(); return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
ids = list(range(first, first + count)); lock = threading.Lock(); found = [0]; nbytes = [0]
def work():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    while True:
        with lock:
            if not ids: return
            i = ids.pop()
        c.request("GET", f"/slurm/{v}/job/{i}", headers={"X-SLURM-USER-NAME": e["SLURM_USER"], "X-SLURM-USER-TOKEN": tok})
        r = c.getresponse(); b = r.read()
        with lock:
            nbytes[0] += len(b)
            if r.status == 200: found[0] += 1
c0 = {n: cpu(p) for n, p in pid.items()}; t0 = time.time()
ts = [threading.Thread(target=work) for _ in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
el = time.time() - t0; c1 = {n: cpu(p) for n, p in pid.items()}
print(json.dumps({"flavor": flavor, "label": f"job-sweep-{count}-t{threads}", "wall_s": round(el, 2), "per_s": round(count / el, 1),
  "restd_cpu_s": round(c1["slurmrestd"] - c0["slurmrestd"], 2), "ctld_cpu_s": round(c1["slurmctld"] - c0["slurmctld"], 2),
  "restd_ms_per_job": round(1000 * (c1["slurmrestd"] - c0["slurmrestd"]) / count, 2), "ctld_ms_per_job": round(1000 * (c1["slurmctld"] - c0["slurmctld"]) / count, 2),
  "found": found[0], "bytes": nbytes[0]}))
