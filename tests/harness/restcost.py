#!/usr/bin/env python3
"""Cost of slurmrestd requests on a harness Slurm (the measurements behind the
exporter's request budget).

  restcost.py FLAVOR LABEL PATH [--repeat K] [--timeout S] [--guard-gib G] [--save FILE]

PATH is after the REST URL (e.g. /slurm/v0.0.42/jobs/state/); several paths may be given
separated by '|' and are each requested once per repetition (e.g. 50 different /job/{id}).
For each request set: wall time (curl), HTTP status, bytes, slurmrestd CPU seconds
(utime+stime from /proc/PID/stat, before/after), slurmrestd peak RSS during it (VmHWM reset
through /proc/PID/clear_refs before), slurmctld and slurmdbd CPU seconds. The guard polls
slurmrestd's VmRSS every 0.1 s and kills slurmrestd (its own pid file) when it crosses G GiB.
Env from `slurm.sh FLAVOR env` (SLURMSCALE_RUN etc. as for slurm.sh); the token is read from
its file and only ever sent in a header. One JSON line per call on stdout.
"""
import json, os, statistics, subprocess, sys, time

HZ = os.sysconf("SC_CLK_TCK")


def args():
    a = sys.argv[1:]
    flavor, label, paths = a[0], a[1], a[2]
    if paths.startswith("@"):
        paths = open(paths[1:]).read().strip()
    opts = {"--repeat": "1", "--timeout": "900", "--guard-gib": "6", "--save": ""}
    i = 3
    while i < len(a):
        opts[a[i]] = a[i + 1]
        i += 2
    return flavor, label, paths.split("|"), opts


def env(flavor):
    out = subprocess.run([os.path.join(os.path.dirname(__file__), "slurm.sh"), flavor, "env"],
                         capture_output=True, text=True, check=True).stdout
    e = {}
    for line in out.splitlines():
        if line.startswith("export ") and "SLURM_JWT=" not in line:
            k, v = line[7:].split("=", 1)
            e[k] = v.strip('"')
    return e


def cpu(pid):
    try:
        s = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return None
    f = s.rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ


def status(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except FileNotFoundError:
        return None


def main():
    flavor, label, paths, opts = args()
    e = env(flavor)
    run = os.path.dirname(e["SLURM_CONF"].rstrip("/").rsplit("/etc/", 1)[0] + "/")
    piddir = os.path.join(os.path.dirname(e["SLURM_CONF"]), "..", "pids")
    pid = {n: open(os.path.join(piddir, n)).read().strip() for n in ("slurmrestd", "slurmctld", "slurmdbd")}
    token = open(e["HARNESS_JWT_FILE"]).read().strip()
    guard_kb = float(opts["--guard-gib"]) * 1024 * 1024
    repeat = int(opts["--repeat"])
    with open(f"/proc/{pid['slurmrestd']}/clear_refs", "w") as f:
        f.write("5")
    c0 = {n: cpu(p) for n, p in pid.items()}
    walls, sizes, codes, killed = [], [], [], None
    peak_rss = 0
    t_start = time.time()
    for r in range(repeat):
        for p in paths:
            out = opts["--save"] or "/dev/null"
            # URL and headers go to curl on stdin (-K -): no token in the process list, and
            # URLs of 20,000 ids fit (the command line would not).
            cmd = ["curl", "-s", "-g", "-o", out, "-w", "%{http_code} %{size_download} %{time_total} %{time_starttransfer}",
                   "--max-time", opts["--timeout"], "-K", "-"]
            conf = (f'header = "X-SLURM-USER-NAME: {e["SLURM_USER"]}"\n'
                    f'header = "X-SLURM-USER-TOKEN: {token}"\n'
                    f'url = "{e["SLURM_REST_URL"] + p}"\n')
            t0 = time.time()
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            proc.stdin.write(conf.encode()); proc.stdin.close()
            while proc.poll() is None:
                rss = status(pid["slurmrestd"], "VmRSS") or 0
                peak_rss = max(peak_rss, rss)
                if rss > guard_kb:
                    killed = {"rss_kb": rss, "after_s": round(time.time() - t0, 1),
                              "restd_cpu_s": round(cpu(pid["slurmrestd"]) - c0["slurmrestd"], 2)}
                    os.kill(int(pid["slurmrestd"]), 9)
                    proc.kill()
                    break
                time.sleep(0.1 if time.time() - t0 > 1 else 0.01)
            o = proc.stdout.read().decode().split(); proc.wait()
            walls.append(time.time() - t0)
            if o:
                codes.append(o[0]); sizes.append(int(o[1]))
            if killed:
                break
        if killed:
            break
    c1 = {n: cpu(p) for n, p in pid.items()}
    hwm = status(pid["slurmrestd"], "VmHWM")
    n = len(walls)
    res = {
        "flavor": flavor, "label": label, "path": paths[0] + (f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""),
        "requests": n, "http": sorted(set(codes)),
        "bytes_median": int(statistics.median(sizes)) if sizes else None, "bytes_total": sum(sizes),
        "wall_median_s": round(statistics.median(walls), 4), "wall_total_s": round(time.time() - t_start, 2),
        "restd_cpu_s": round(c1["slurmrestd"] - c0["slurmrestd"], 3) if c1["slurmrestd"] is not None else None,
        "ctld_cpu_s": round(c1["slurmctld"] - c0["slurmctld"], 3),
        "dbd_cpu_s": round(c1["slurmdbd"] - c0["slurmdbd"], 3),
        "restd_peak_rss_mib": round(max(peak_rss, hwm or 0) / 1024, 1),
        "restd_pid": int(pid["slurmrestd"]), "restd_rss_after_mib": round((status(pid["slurmrestd"], "VmRSS") or 0) / 1024, 1),
    }
    if n > 1:
        res["restd_cpu_ms_per_req"] = round(1000 * res["restd_cpu_s"] / n, 2) if res["restd_cpu_s"] is not None else None
        res["ctld_cpu_ms_per_req"] = round(1000 * res["ctld_cpu_s"] / n, 2)
    if killed:
        res["killed_by_guard"] = killed
    print(json.dumps(res), flush=True)


main()
