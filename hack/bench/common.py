"""What the benchmarks share (their method: hack/bench/README.md): paths, processes and their
memory, loopback ports, the control planes they start or use, and the catalogs they serve.
Python 3 alone; nothing here measures by itself."""
import base64, http.client, json, os, re, signal, socket, ssl, subprocess, sys, time, urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("OLM_SHARED_DIR", REPO.parent / "shared"))
TESTDATA = SHARED / "testdata/community-operators/operators"
CACHE = Path(os.environ.get("OLM_RS_CACHE_DIR", Path.home() / ".cache/olm-rs"))
UPSTREAM_VERSION = "v0.46.0"
UPSTREAM_MODULE = "github.com/operator-framework/operator-lifecycle-manager"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------- ports


def free_port():
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_busy(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------------------- memory and time


def proc_status(pid):
    """The numeric fields of /proc/PID/status (VmRSS, VmHWM, RssAnon, …; KiB for the memory
    ones); empty once the process is gone."""
    fields = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return fields
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.split()
        if value and value[0].isdigit():
            fields[key] = int(value[0])
    return fields


def rss_mib(pid, field="VmRSS"):
    """A process's resident memory (or another /proc status field: VmHWM, RssAnon…) in MiB;
    None once the process is gone."""
    kib = proc_status(pid).get(field)
    return None if kib is None else kib / 1024


def cpu_seconds(pid):
    """User + system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_started(pid):
    """A process's start as a Unix time, from /proc (clock ticks after boot)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


GNU_TIME = "/usr/bin/time"


def measure(cmd, stdout_path=None, check=True):
    """Runs cmd; returns (seconds, peak RSS in MiB) of that command alone. GNU time reports
    the RSS, because a forked child's maxrss would also count this Python process's pages."""
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit("needs GNU time: apt-get install time")
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    start = time.perf_counter()
    proc = subprocess.run([GNU_TIME, "-f", "maxrss=%M", *map(str, cmd)], stdout=out, stderr=subprocess.PIPE,
                          env=server_env())
    elapsed = time.perf_counter() - start
    if stdout_path:
        out.close()
    stderr = proc.stderr.decode()
    if proc.returncode != 0 and check:
        sys.exit(f"{' '.join(map(str, cmd[:3]))} … failed: {stderr[-2000:]}")
    rss_kib = int(re.findall(r"maxrss=(\d+)", stderr)[-1])
    return elapsed, rss_kib / 1024


# ---------------------------------------------------------------------------- processes


def without(*names):
    """The environment without these variables."""
    return {k: v for k, v in os.environ.items() if k not in names}


def server_env():
    """The environment of the catalog servers and tools a bench times: without
    OLM_CACHE_DIR, so that a cache directory set in the shell never reaches a timed run."""
    return without("OLM_CACHE_DIR")


class Processes:
    """Everything a bench starts, each in its own session with its log in logdir, stopped (by
    pid) in reverse order on teardown."""

    def __init__(self, logdir):
        self.logdir = logdir
        self.procs = []

    def spawn(self, name, cmd, env=None, cwd=None):
        log_path = self.logdir / f"{name}.log"
        with open(log_path, "wb") as logfile:
            proc = subprocess.Popen([str(c) for c in cmd], stdout=logfile, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)
        proc.bench_name, proc.bench_log = name, log_path
        self.procs.append(proc)
        return proc

    def check(self, proc):
        check_alive(proc)

    def tail(self, name, lines=20):
        return tail(self.logdir / f"{name}.log", lines)

    def stop_all(self):
        for proc in reversed(self.procs):
            signal_group(proc, signal.SIGTERM)
        deadline = time.time() + 10
        for proc in reversed(self.procs):
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait()
        self.procs = []


def tail(path, lines=20):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def proc_name(proc):
    return getattr(proc, "bench_name", None) or Path(str(proc.args[0])).name


def check_alive(proc):
    """Raises BenchError, with the last lines of its log when it has one, once proc exited."""
    if proc.poll() is not None:
        log_path = getattr(proc, "bench_log", None)
        raise BenchError(f"{proc_name(proc)} exited with {proc.returncode}"
                         + (f"; last log lines:\n{tail(log_path)}" if log_path else ""))


def signal_group(proc, sig):
    """sig to a process (to its whole group when Processes started it in its own session)."""
    if proc.poll() is not None:
        return
    try:
        if getattr(proc, "bench_log", None):
            os.killpg(proc.pid, sig)  # its own session: the pid is the group
        else:
            proc.send_signal(sig)
    except ProcessLookupError:
        pass


def stop(proc, timeout=10):
    """SIGTERM, then SIGKILL after `timeout` s."""
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
        proc.wait()


def wait_port(proc, port, timeout=120):
    """Until something listens on port; BenchError when proc exits first or after timeout."""
    deadline = time.time() + timeout
    while not port_busy(port):
        check_alive(proc)
        if time.time() > deadline:
            raise BenchError(f"{proc_name(proc)} is not listening on {port} after {timeout:g}s")
        time.sleep(0.05)


def wait_ready(proc, admin_port, timeout=60):
    """Until `olm run`'s admin server answers /readyz with 200."""
    wait_port(proc, admin_port, timeout)
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        check_alive(proc)
        if time.time() > deadline:
            raise BenchError(f"{proc_name(proc)} is not ready after {timeout:g} s"
                             + (f"; log: {proc.bench_log}" if getattr(proc, "bench_log", None) else ""))
        time.sleep(0.1)


def admin_get(port, path):
    """GET path on `olm run`'s admin server, as text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def metric(port, series):
    """One series of `olm run`'s /metrics (0 when absent)."""
    for line in admin_get(port, "/metrics").splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def interrupt_on_signals():
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so a bench tears its control
    planes and processes down however it is stopped (SIGINT even when started ignoring it)."""
    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)


def ignore_signals():
    """For teardown: a second Ctrl-C must not cut it short."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def exit_on_error(main):
    """Runs main(); a BenchError ends the script with its message (exit 1), no traceback."""
    try:
        return main()
    except BenchError as e:
        sys.exit(f"error: {e}")


# ---------------------------------------------------------------------------- binaries


def opm_path():
    """Upstream opm as hack/opm/build cached it."""
    out = subprocess.run([REPO / "hack/opm/path"], capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError("opm is not built: run hack/opm/build")
    return out.stdout.strip().splitlines()[-1]


def upstream_olm_paths():
    """(bin directory, CRD directory) of upstream OLM as hack/upstream-olm/build leaves them:
    its `olm` and `catalog` binaries, and deploy/chart/crds of the module it downloaded."""
    out = subprocess.run([REPO / "hack/upstream-olm/build", "--print-path"], capture_output=True, text=True)
    bin_dir = Path(out.stdout.strip().splitlines()[-1])
    if out.returncode != 0:
        raise BenchError(f"upstream OLM is not built: run hack/upstream-olm/build (→ {bin_dir})")
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    crds = Path(gomodcache) / f"{UPSTREAM_MODULE}@{UPSTREAM_VERSION}/deploy/chart/crds"
    if not crds.is_dir():
        raise BenchError(f"no upstream CRDs at {crds} (hack/upstream-olm/build downloads the module)")
    return bin_dir, crds


# ---------------------------------------------------------------------------- control planes

# The control planes the benches start, each its own: (state directory, API server port, etcd
# client port, etcd peer port). All below the ephemeral range (32768+), where an outgoing
# connection may hold a port; none is the shared test cluster's (target/cluster, 26443/23790/
# 23800), which the benches that need "the control plane up" use instead.
CLUSTERS = {
    "upstream": (REPO / "target/cluster-upstream", 27443, 24790, 24800),  # install.py, bulk.py
    "ours": (REPO / "target/cluster-bench", 28443, 25790, 25800),
    "csvbench": (REPO / "target/cluster-csvbench", 29443, 26790, 26800),  # csv.py
    "catalog-upstream": (REPO / "target/cluster-catalog-upstream", 30443, 31790, 31800),  # install-catalog.py
    "catalog-ours": (REPO / "target/cluster-catalog-ours", 30543, 31890, 31900),
    "rest-upstream": (REPO / "target/cluster-rest-upstream", 30643, 31990, 32000),  # rest.py
    "rest-ours": (REPO / "target/cluster-rest-ours", 30743, 32090, 32100),
    "upgrades": (REPO / "target/cluster-upgrades", 30843, 32190, 32200),  # upgrades.py
}


class Cluster:
    """One hack/cluster instance of CLUSTERS, with audit on (OLM_AUDIT=1) unless audit=False."""

    def __init__(self, name, side=None, audit=True):
        self.dir, self.api_port, self.etcd_port, self.peer_port = CLUSTERS[name]
        self.side = side or name
        self.audit = audit
        self.env = dict(os.environ, OLM_CLUSTER_DIR=str(self.dir), OLM_APISERVER_PORT=str(self.api_port),
                        OLM_ETCD_CLIENT_PORT=str(self.etcd_port), OLM_ETCD_PEER_PORT=str(self.peer_port),
                        OLM_AUDIT="1" if audit else "0")
        self.kubeconfig = self.dir / "kubeconfig"
        self.audit_log = self.dir / "logs/audit.log"
        self.started = False

    def ports(self):
        return self.api_port, self.etcd_port, self.peer_port

    def up(self, nodes=1):
        for port in self.ports():
            if port_busy(port):
                raise BenchError(
                    f"port {port} is in use: another benchmark running, or a stale {self.side} control plane "
                    f"(stop it with: OLM_CLUSTER_DIR={self.dir} OLM_APISERVER_PORT={self.api_port} "
                    f"OLM_ETCD_CLIENT_PORT={self.etcd_port} OLM_ETCD_PEER_PORT={self.peer_port} "
                    f"hack/cluster/down --clean)")
        self.started = True  # from here on, teardown runs `down --clean` on this directory
        # Clean state: a previous, interrupted run may have left its directory behind.
        subprocess.run([REPO / "hack/cluster/down", "--clean"], env=self.env, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log(f"{self.side}: starting a control plane in {self.dir.relative_to(REPO)} (API server :{self.api_port}, "
            f"audit {'on' if self.audit else 'off'})")
        out = subprocess.run([REPO / "hack/cluster/up", "--nodes", str(nodes)], env=self.env, cwd=REPO,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise BenchError(f"hack/cluster/up failed:\n{out.stderr[-3000:]}")
        if self.audit and not self.audit_log.exists():
            raise BenchError(f"no audit log at {self.audit_log}: does hack/cluster/up support OLM_AUDIT=1?")

    def down(self):
        if not self.started:
            return
        log(f"{self.side}: removing the control plane in {self.dir.relative_to(REPO)}")
        subprocess.run([REPO / "hack/cluster/down", "--clean"], env=self.env, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.started = False

    def kubectl(self, *args, stdin=None, check=True):
        out = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *map(str, args)],
                             input=stdin, capture_output=True, text=True)
        if check and out.returncode != 0:
            raise BenchError(f"kubectl {' '.join(map(str, args[:3]))} failed: {out.stderr.strip()[-2000:]}")
        return out.stdout


# The shared control plane of hack/cluster/up (the benches that need "the control plane up"):
# $KUBECONFIG, else the one hack/cluster/up writes.
KUBECONFIG = os.environ.get("KUBECONFIG", str(REPO / "target/cluster/kubeconfig"))
ENV = dict(os.environ, KUBECONFIG=KUBECONFIG)


def kubectl(*args, stdin=None):
    """kubectl on the shared control plane; raises CalledProcessError on failure."""
    return subprocess.run(["kubectl", *map(str, args)], input=stdin, env=ENV, capture_output=True, text=True,
                          check=True).stdout


def credentials(kubeconfig, workdir):
    """(server URL, SSL context) of a kubeconfig's client-certificate user, its files written
    into workdir; read through kubectl, so without PyYAML."""
    out = subprocess.run(["kubectl", "config", "view", "--raw", "-o", "json", "--kubeconfig", str(kubeconfig)],
                         capture_output=True, text=True, check=True)
    cfg = json.loads(out.stdout)
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    files = {}
    for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
        path = workdir / key
        path.write_bytes(base64.b64decode(cluster.get(key) or user.get(key)))
        path.chmod(0o600)
        files[key] = path
    ctx = ssl.create_default_context(cafile=str(files["certificate-authority-data"]))
    ctx.load_cert_chain(str(files["client-certificate-data"]), str(files["client-key-data"]))
    return cluster["server"], ctx


BENCH_UA = "olm-bench"  # the user agent of the benches' own requests (Api), not counted as OLM's


class Api:
    """A minimal API client (the cluster's admin certificate, user agent olm-bench): GETs
    and watches without kubectl's start-up cost, and without counting as OLM."""

    def __init__(self, kubeconfig, workdir):
        server, self.ctx = credentials(kubeconfig, workdir)
        self.host, self.port = server.removeprefix("https://").rsplit(":", 1)

    def conn(self, timeout=30):
        return http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx, timeout=timeout)

    def get(self, path, retry_for=30):
        """GET as JSON; None on 404. A 429 (the API server's watch cache still initialising
        a new resource) is retried for up to retry_for seconds."""
        deadline = time.time() + retry_for
        while True:
            c = self.conn()
            try:
                c.request("GET", path, headers={"User-Agent": BENCH_UA, "Accept": "application/json"})
                r = c.getresponse()
                body = r.read()
            finally:
                c.close()
            if r.status == 404:
                return None
            if r.status == 429 and time.time() < deadline:
                time.sleep(0.2)
                continue
            if r.status != 200:
                raise BenchError(f"GET {path}: {r.status} {body[:500]!r}")
            return json.loads(body)

    def poll(self, what, timeout, fn, interval=0.1):
        deadline = time.time() + timeout
        while True:
            value = fn()
            if value:
                return value
            if time.time() > deadline:
                raise BenchError(f"{what} not within {timeout}s")
            time.sleep(interval)


# ---------------------------------------------------------------------------- catalogs


def testdata_packages():
    """The package directories of the community-operators testdata, without kuadrant-operator
    (opm refuses the catalog it is in: its `oci://` related image)."""
    return [str(p) for p in sorted(TESTDATA.iterdir()) if p.is_dir() and p.name != "kuadrant-operator"]


def render_testdata(olm, dest):
    """testdata_packages() rendered by `olm catalog render` into dest/catalog.json; returns them."""
    packages = testdata_packages()
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / "catalog.json", "wb") as f:
        subprocess.run([olm, "catalog", "render", *packages], stdout=f, check=True)
    return packages


def replicated_catalog(base_file, copies, dest):
    """The catalog `copies` times, each copy's packages renamed, as one FBC directory;
    returns how many bundles it holds."""
    text = base_file.read_text()
    blobs = [json.loads(b) for b in split_json_stream(text)]
    names = sorted({b.get("package") or b["name"] for b in blobs if b["schema"] in ("olm.package", "olm.channel", "olm.bundle")})
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / "catalog.json", "w") as f:
        for i in range(copies):
            rename = {n: f"{n}-c{i}" for n in names}
            for b in blobs:
                b = json.loads(json.dumps(b))
                if b["schema"] == "olm.package":
                    b["name"] = rename[b["name"]]
                elif "package" in b:
                    b["package"] = rename.get(b["package"], b["package"])
                if b["schema"] == "olm.bundle":
                    for p in b.get("properties", []):
                        if p["type"] == "olm.package":
                            p["value"]["packageName"] = rename.get(p["value"]["packageName"], p["value"]["packageName"])
                f.write(json.dumps(b) + "\n")
    return len([b for b in blobs if b["schema"] == "olm.bundle"]) * copies


def split_json_stream(text):
    """The documents of a JSON stream (as `olm catalog render` writes it), each re-encoded."""
    decoder, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, end = decoder.raw_decode(text, i)
        out.append(json.dumps(obj))
        i = end
