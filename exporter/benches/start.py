#!/usr/bin/env python3
"""The exporter's start against a harness Slurm full of jobs (targets: with 100,000 queued
jobs, the first scale-up decision <= 60 s after start, a complete job table <= 10 min after
start, slurmrestd's peak RSS during our start <= 2 GiB).

  start.py FLAVOR BINARY [--timeout 900] [--interval 2s] [--port P] [--out FILE]
           [--min-avail-gib 3] [--new-jobs 20] [--new-after 5] [EXTRA EXPORTER ARGS...]

Env: the same SLURMSCALE_RUN / SLURMSCALE_PORT_BASE_* as the `tests/harness/slurm.sh FLAVOR
start` that runs the cluster (queue the jobs first with tests/harness/load-jobs.sh). Restarts
slurmrestd (restd-stop, restd-start) so its peak RSS is ours alone, starts `BINARY exporter
--no-kubernetes` on 127.0.0.1:PORT with RUST_LOG=info (log next to --out), and every 0.5 s
scrapes its /metrics and samples VmRSS of slurmrestd and of the exporter. Times, in seconds
after the exporter's start:
  t_first_data    first scrape with any slurm_partition_jobs_pending series
  t_first_demand  first scrape where sum(slurm_partition_demand_jobs) > 0 (all classes; also
                  t_first_schedulable for class="schedulable"): the earliest an autoscaler
                  could scale up
  t_complete      first scrape where slurm_exporter_jobs_unlisted_new, _jobs_maybe_started and
                  (if exported) _jobs_unread are 0 and sum(slurm_partition_jobs_pending) is
                  within 1 % of `squeue -h -t pd` run then (at most every 10 s, in the
                  background, only once the gauges say complete: it is slurmctld work too).
                  squeue without -r: the exporter counts an unsplit pending array once, as
                  slurmctld holds it, and `squeue -r` would list each task.
  t_new_submitted --new-after seconds after the start, --new-jobs one-node jobs are submitted
                  to the `slinky` partition (no node until a pod comes, no other job there):
                  when the last sbatch returned. 24.11 refuses jobs for a partition without
                  a node: give it one that runs nothing first (`slurm.sh 24.11 pod-up
                  slinky-0`, then `scontrol update nodename=slinky-0 state=drain
                  reason=bench`); the jobs then wait on ReqNodeNotAvail, which is demand
  t_new_demand    first scrape where slurm_partition_demand_jobs{partition="slinky",
                  class="schedulable"} counts them all (new_demand_after_s: the difference —
                  how long an autoscaler restarted beside a long queue is blind to new work)
Stops at t_complete + 10 s or --timeout, kills the exporter (its pid) and prints one JSON line
(appended to --out too): the times, peak RSS of both (max of samples and VmHWM), slurmrestd and
slurmctld CPU seconds during the run, slurm_exporter_job_list_requests_total by request, the
request count/seconds by endpoint, pending counted vs squeue, WARN/ERROR lines in the log.
Guard: when MemAvailable falls under --min-avail-gib, slurmrestd is killed (its pid) and the run
ends, recorded as restd_killed (its RSS then); a slurmrestd that dies by itself shows as
restd_died. The token is only ever in its file.
"""
import argparse, concurrent.futures, json, os, re, signal, subprocess, time, urllib.request

HZ = os.sysconf("SC_CLK_TCK")
HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "harness", "slurm.sh")
SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def harness(flavor, *cmd):
    return subprocess.run([HARNESS, flavor, *cmd], capture_output=True, text=True, check=True).stdout


def env(flavor):
    e = {}
    for line in harness(flavor, "env").splitlines():
        if line.startswith("export ") and "SLURM_JWT=" not in line:
            k, v = line[7:].split("=", 1)
            e[k] = v.strip('"')
    return e


def cpu(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / HZ
    except (FileNotFoundError, ProcessLookupError):
        return None


def status_kb(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def mem_available_kb():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])


def scrape(port):
    """{name: [(labels text, value)]}, or None while the exporter does not answer."""
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    m = {}
    for line in body.splitlines():
        s = SERIES.match(line)
        if s:
            m.setdefault(s[1], []).append((s[2] or "", float(s[3])))
    return m


def total(m, name, label=""):
    return sum(v for l, v in m.get(name, []) if label in l) if name in m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("flavor", choices=["22.05", "24.11"])
    ap.add_argument("binary")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--interval", default="2s")
    ap.add_argument("--port", type=int)
    ap.add_argument("--out", default="start.jsonl")
    ap.add_argument("--min-avail-gib", type=float, default=3)
    ap.add_argument("--new-jobs", type=int, default=20)
    ap.add_argument("--new-after", type=float, default=5)
    a, extra = ap.parse_known_args()
    e = env(a.flavor)
    port = a.port or (28890 if a.flavor == "22.05" else 29890)
    piddir = os.path.join(os.path.dirname(e["SLURM_CONF"]), "..", "pids")
    squeue_env = dict(os.environ, SLURM_CONF=e["SLURM_CONF"])
    squeue_env.pop("SLURM_JWT", None)

    harness(a.flavor, "restd-stop")
    harness(a.flavor, "restd-start")
    pid = {n: int(open(os.path.join(piddir, n)).read()) for n in ("slurmrestd", "slurmctld")}
    c0 = {n: cpu(p) for n, p in pid.items()}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = os.path.join(os.path.dirname(os.path.abspath(a.out)), f"start-{a.flavor}-{stamp}.exporter.log")
    cmd = [a.binary, "exporter", "--no-kubernetes", "--listen", f"127.0.0.1:{port}", "--interval", a.interval,
           "--slurm-url", e["SLURM_REST_URL"], "--slurm-user", e["SLURM_USER"], "--token-file", e["HARNESS_JWT_FILE"],
           "--cluster", e["SLURM_CLUSTER"], *extra]
    xenv = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    xenv["RUST_LOG"] = "info"
    t0 = time.time()
    exporter = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=xenv)

    r = {"flavor": a.flavor, "binary": a.binary, "binary_mtime": time.ctime(os.path.getmtime(a.binary)),
         "extra_args": extra, "interval": a.interval, "started": stamp, "log": log,
         "t_first_data": None, "t_first_demand": None, "t_first_schedulable": None, "t_complete": None,
         "new_jobs": a.new_jobs, "t_new_submitted": None, "t_new_demand": None, "new_demand_after_s": None}
    sbatch_env = dict(squeue_env)

    def submit_new():
        ids = []
        for _ in range(a.new_jobs):
            run = subprocess.run([f"{e['SLURM_BIN']}/sbatch", "--parsable", "-p", "slinky", "-J", "start-new", "-o", "/dev/null",
                                  "--wrap", "sleep 60"], capture_output=True, text=True, env=sbatch_env)
            if run.returncode != 0:
                # Said in the result, not waited for until --timeout (24.11 refuses jobs for
                # a partition without a node: see t_new_submitted above).
                r["new_jobs_refused"] = run.stderr.strip()
                return ids
            ids.append(run.stdout.strip())
        r["t_new_submitted"] = round(time.time() - t0, 1)
        return ids

    new_pool = concurrent.futures.ThreadPoolExecutor(1)
    new_ids = None
    peak = {"restd": 0, "exporter": 0}
    pool = concurrent.futures.ThreadPoolExecutor(1)
    sq, sq_started, sq_pending, sq_t = None, -1e9, None, None  # running squeue, its start, our count then
    last, restd_gone = {}, None
    while True:
        now = time.time() - t0
        for n, p in (("restd", pid["slurmrestd"]), ("exporter", exporter.pid)):
            peak[n] = max(peak[n], status_kb(p, "VmRSS") or 0)
        if cpu(pid["slurmrestd"]) is None:
            restd_gone = restd_gone or {"restd_died": {"after_s": round(now, 1), "peak_rss_gib": round(peak["restd"] / 2**20, 2)}}
            break
        if mem_available_kb() < a.min_avail_gib * 2**20:
            rss = status_kb(pid["slurmrestd"], "VmRSS") or 0
            os.kill(pid["slurmrestd"], signal.SIGKILL)
            restd_gone = {"restd_killed": {"after_s": round(now, 1), "rss_gib": round(rss / 2**20, 2),
                                           "mem_available_gib": round(mem_available_kb() / 2**20, 2)}}
            break
        if exporter.poll() is not None:
            r["exporter_exit"] = exporter.returncode
            break
        if new_ids is None and a.new_jobs > 0 and now >= a.new_after:
            new_ids = new_pool.submit(submit_new)
        m = scrape(port)
        if m:
            last = m
            if r["t_new_submitted"] is not None and r["t_new_demand"] is None and \
                    (total(m, "slurm_partition_demand_jobs", 'partition="slinky",class="schedulable"') or 0) >= a.new_jobs:
                r["t_new_demand"] = round(now, 1)
                r["new_demand_after_s"] = round(r["t_new_demand"] - r["t_new_submitted"], 1)
            pending = total(m, "slurm_partition_jobs_pending")
            demand = total(m, "slurm_partition_demand_jobs")
            sched = total(m, "slurm_partition_demand_jobs", 'class="schedulable"')
            if r["t_first_data"] is None and pending is not None:
                r["t_first_data"] = round(now, 1)
            if r["t_first_demand"] is None and (demand or 0) > 0:
                r["t_first_demand"] = round(now, 1)
            if r["t_first_schedulable"] is None and (sched or 0) > 0:
                r["t_first_schedulable"] = round(now, 1)
            gauges_done = all(total(m, g) == 0 for g in ("slurm_exporter_jobs_unlisted_new", "slurm_exporter_jobs_maybe_started")) \
                and total(m, "slurm_exporter_jobs_unread") in (None, 0)
            if sq is not None and sq.done():
                r["squeue_pending"], r["pending_counted"] = sq.result(), sq_pending
                if r["t_complete"] is None and abs(sq_pending - sq.result()) <= 0.01 * sq.result():
                    r["t_complete"] = sq_t
                sq = None
            if r["t_complete"] is None and gauges_done and pending is not None and sq is None and now - sq_started >= 10:
                sq_started, sq_pending, sq_t = now, pending, round(now, 1)
                sq = pool.submit(lambda: len(subprocess.run([f"{e['SLURM_BIN']}/squeue", "-h", "-t", "pd", "-o", "%i"],
                                                            capture_output=True, text=True, env=squeue_env).stdout.split()))
        new_done = a.new_jobs == 0 or r["t_new_demand"] is not None or "new_jobs_refused" in r
        if (r["t_complete"] is not None and new_done and now > r["t_complete"] + 10) or now > a.timeout:
            break
        time.sleep(max(0, 0.5 - (time.time() - t0 - now)))

    r["wall_s"] = round(time.time() - t0, 1)
    c1 = {n: cpu(p) for n, p in pid.items()}
    hwm = {"restd": status_kb(pid["slurmrestd"], "VmHWM"), "exporter": status_kb(exporter.pid, "VmHWM")}
    if exporter.poll() is None:
        exporter.send_signal(signal.SIGTERM)
        try:
            exporter.wait(10)
        except subprocess.TimeoutExpired:
            exporter.kill()
            exporter.wait()
    pool.shutdown(wait=True)
    if new_ids is not None:
        ids = [i for i in new_ids.result() if i]
        if ids:
            subprocess.run([f"{e['SLURM_BIN']}/scancel", *ids], env=sbatch_env)
    new_pool.shutdown(wait=True)
    if sq is not None:
        r["squeue_pending"], r["pending_counted"] = sq.result(), sq_pending
    if "squeue_pending" not in r:  # never complete: one count for the record, after the run
        r["pending_counted"] = total(last, "slurm_partition_jobs_pending")
        r["squeue_pending"] = len(subprocess.run([f"{e['SLURM_BIN']}/squeue", "-h", "-t", "pd", "-o", "%i"],
                                                 capture_output=True, text=True, env=squeue_env).stdout.split())
    for n in peak:
        r[f"{n}_peak_rss_mib"] = round(max(peak[n], hwm[n] or 0) / 1024, 1)
    r["restd_cpu_s"] = round(c1["slurmrestd"] - c0["slurmrestd"], 1) if c1["slurmrestd"] is not None else None
    r["ctld_cpu_s"] = round(c1["slurmctld"] - c0["slurmctld"], 1)
    r["job_list_requests"] = {re.search(r'request="([^"]*)"', l)[1]: int(v)
                              for l, v in last.get("slurm_exporter_job_list_requests_total", [])}
    r["requests"] = {re.search(r'endpoint="([^"]*)"', l)[1]: [int(c), round(s, 1)]
                     for (l, c), (_, s) in zip(last.get("slurm_exporter_request_duration_seconds_count", []),
                                               last.get("slurm_exporter_request_duration_seconds_sum", []))}
    r["final_gauges"] = {g: total(last, f"slurm_exporter_{g}") for g in ("jobs_unlisted_new", "jobs_maybe_started", "jobs_unread")}
    lines = re.sub(r"\x1b\[[0-9;]*m", "", open(log, errors="replace").read()).splitlines()
    r["log_warn"] = sum(" WARN " in l for l in lines)
    r["log_error"] = sum(" ERROR " in l for l in lines)
    r.update(restd_gone or {})
    print(json.dumps(r), flush=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(r) + "\n")


main()
