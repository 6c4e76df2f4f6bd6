#!/usr/bin/env python3
"""Benchmark: `olm catalog serve` and `olm-registry` against upstream `opm serve`, side by
side in one run, on the community-operators testdata rendered to FBC (replicated to show
growth) or --catalog DIR: start time, RSS at start, after queries and at peak, and the ratios
opm/ours. Method: hack/bench/README.md.

Usage: hack/bench/serve.py [--runs N] [--copies 1,4,16] [--catalog DIR]
           [--tools olm,olm-registry,opm,reg-cache,opm-cache]
       (needs target/release/olm and olm-registry, and hack/opm/build)
"""
import argparse, json, shutil, socket, statistics, struct, subprocess, sys, tempfile, time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO, free_port, opm_path, render_testdata, replicated_catalog, rss_mib, server_env, stop,
)


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    def length(n):  # 7-bit prefix integer, no Huffman
        if n < 127:
            return bytes([n])
        out, n = [127], n - 127
        while n >= 128:
            out.append((n & 127) | 128)
            n >>= 7
        return bytes(out + [n])
    name, value = name.encode(), value.encode()
    return b"\x00" + length(len(name)) + name + length(len(value)) + value


def grpc_first_answer(port, path="/api.Registry/ListPackages", timeout=1.0):
    """Calls a server-streaming RPC with an empty request; True once a response message
    arrives, False if the port is not open yet."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return False
    with sock:
        sock.settimeout(30)
        headers = b"".join(hpack_literal(k, v) for k, v in [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers")])
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0)
                     + frame(1, 4, 1, headers)                      # HEADERS, END_HEADERS
                     + frame(0, 1, 1, b"\x00\x00\x00\x00\x00"))     # DATA: empty message, END_STREAM
        buf = b""
        while True:
            while len(buf) < 9:
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                buf += chunk
            n = int.from_bytes(buf[:3], "big")
            kind, flags = buf[3], buf[4]
            while len(buf) < 9 + n:
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                buf += chunk
            payload, buf = buf[9:9 + n], buf[9 + n:]
            if kind == 4 and not flags & 1:
                sock.sendall(frame(4, 1, 0))                        # SETTINGS ACK
            elif kind == 0 and len(payload) >= 5:
                return True                                         # a response message
            elif kind == 1 and flags & 1:
                raise RuntimeError(f"{path} ended without a message (trailers only)")
            elif kind == 7:
                raise RuntimeError("GOAWAY")


def grpc_call(port, path, message=b"", timeout=60):
    """Calls an RPC with one request message (protobuf bytes) and reads the whole answer;
    returns the response messages (protobuf bytes). Opens the flow-control windows wide so
    the server can stream without waiting for WINDOW_UPDATEs."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        headers = b"".join(hpack_literal(k, v) for k, v in [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers")])
        window = (1 << 31) - 1
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                     + frame(4, 0, 0, struct.pack(">HI", 4, window))                # INITIAL_WINDOW_SIZE
                     + frame(8, 0, 0, struct.pack(">I", window - 65535))            # connection window
                     + frame(1, 4, 1, headers)
                     + frame(0, 1, 1, b"\x00" + struct.pack(">I", len(message)) + message))
        buf, pos, body = bytearray(), 0, []
        while True:
            while len(buf) - pos < 9 or len(buf) - pos < 9 + int.from_bytes(buf[pos:pos + 3], "big"):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError(f"{path}: connection closed")
                del buf[:pos]
                pos = 0
                buf += chunk
            n = int.from_bytes(buf[pos:pos + 3], "big")
            kind, flags = buf[pos + 3], buf[pos + 4]
            payload = bytes(buf[pos + 9:pos + 9 + n])
            pos += 9 + n
            if kind == 4 and not flags & 1:
                sock.sendall(frame(4, 1, 0))
            elif kind == 0:
                body.append(payload)
            elif kind == 6 and not flags & 1:
                sock.sendall(frame(6, 1, 0, payload))                          # PING ACK
            elif kind == 7:
                raise RuntimeError("GOAWAY")
            if kind in (0, 1) and flags & 1:                                       # END_STREAM
                break
    body = b"".join(body)
    messages, i = [], 0
    while i + 5 <= len(body):
        n = int.from_bytes(body[i + 1:i + 5], "big")
        messages.append(body[i + 5:i + 5 + n])
        i += 5 + n
    return messages


def proto_strings(*fields):
    """A protobuf message of string fields 1, 2, …"""
    out = b""
    for number, value in enumerate(fields, 1):
        value = value.encode()
        length, n = b"", len(value)
        while True:
            length += bytes([(n & 127) | (128 if n > 127 else 0)])
            n >>= 7
            if not n:
                break
        out += bytes([number << 3 | 2]) + length + value
    return out


def sample_bundles(catalog_dir, count=20):
    """(package, channel, bundle) of `count` channel entries spread over the catalog, and
    how many bundles the catalog has."""
    entries, decoder, bundles = [], json.JSONDecoder(), 0
    for f in sorted(Path(catalog_dir).rglob("*.json")):
        # A stream of JSON values, one per line or pretty-printed (opm and olm render both).
        text, i = f.read_text(), 0
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            blob, i = decoder.raw_decode(text, i)
            bundles += blob.get("schema") == "olm.bundle"
            if blob.get("schema") == "olm.channel":
                entries += [(blob["package"], blob["name"], e["name"]) for e in blob["entries"]]
    step = max(1, len(entries) // count)
    return entries[::step][:count], bundles


def query(port, bundles):
    """A whole ListBundles, then GetBundle of each of `bundles`."""
    if not grpc_call(port, "/api.Registry/ListBundles"):
        raise RuntimeError("ListBundles answered no bundle")
    for b in bundles:
        if len(grpc_call(port, "/api.Registry/GetBundle", proto_strings(*b))) != 1:
            raise RuntimeError(f"GetBundle {b} failed")


def run_server(cmd, port, bundles):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=server_env())
    try:
        while not grpc_first_answer(port):
            if proc.poll() is not None:
                message = proc.stderr.read().decode()[-300:].strip()
                print(f"{Path(cmd[0]).name} refused the catalog: {message}", file=sys.stderr)
                return None
            if time.perf_counter() - start > 300:
                sys.exit(f"{cmd[0]} not ready after 300 s")
            time.sleep(0.005)
        ready = time.perf_counter() - start
        rss_ready = rss_mib(proc.pid)
        time.sleep(2)
        grpc_first_answer(port)
        rss_settled = rss_mib(proc.pid)
        query(port, bundles)
        rss_queried = rss_mib(proc.pid)
        peak = rss_mib(proc.pid, "VmHWM")
        return ready, rss_ready, rss_settled, rss_queried, peak
    finally:
        stop(proc, 10)
        proc.stderr.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", default="1,4,16", help="catalog sizes, as copies of the testdata")
    ap.add_argument("--catalog", type=Path, help="serve this FBC directory instead of the testdata")
    ap.add_argument("--tools", default="olm,olm-registry,opm,reg-cache,opm-cache",
                    help="servers to run (opm's figures print as nan when left out)")
    args = ap.parse_args()
    tools = args.tools.split(",")
    olm = REPO / "target/release/olm"
    registry = REPO / "target/release/olm-registry"
    if not olm.exists() or not registry.exists():
        sys.exit("build it first: cargo build --release --bin olm --bin olm-registry")
    opm = opm_path()
    work = Path(tempfile.mkdtemp(prefix="olm-bench-serve-"))
    rows = []
    try:
        if args.catalog:
            catalogs = [(args.catalog, None)]
        else:
            base = work / "base"
            render_testdata(olm, base)
            catalogs = []
            for copies in (int(c) for c in args.copies.split(",")):
                cat = work / f"x{copies}"
                catalogs.append((cat, replicated_catalog(base / "catalog.json", copies, cat)))
        for cat, n in catalogs:
            bundles, counted = sample_bundles(cat)
            n = counted if n is None else n
            size = sum(p.stat().st_size for p in cat.rglob("*") if p.is_file()) / (1 << 20)
            for tool in ("olm", "olm-registry", "opm", "reg-cache", "opm-cache"):
                samples = []
                cache = work / f"{tool}-{cat.name}"

                def command(port):
                    return [str(c) for c in {
                        "olm": [olm, "catalog", "serve", cat, "--port", port],
                        "olm-registry": [registry, cat, "--port", port],
                        "opm": [opm, "serve", cat, "--port", port, "--pprof-addr", "", "-t", "/dev/null"],
                        "reg-cache": [registry, cat, "--port", port, "--cache-dir", cache],
                        "opm-cache": [opm, "serve", cat, "--port", port, "--pprof-addr", "", "-t", "/dev/null",
                                      "--cache-dir", cache],
                    }[tool]]
                if tool.endswith("-cache") and tool in tools:
                    # Built once, untimed (an image build does this step).
                    subprocess.run(command(free_port()) + ["--cache-only"], check=True, capture_output=True,
                                   env=server_env())
                for _ in range(args.runs if tool in tools else 0):
                    port = free_port()
                    result = run_server(command(port), port, bundles)
                    if result is None:
                        break
                    samples.append(result)
                if not samples:
                    samples = [(float("nan"),) * 5]
                med = lambda i: statistics.median(s[i] for s in samples)
                rows.append((n, size, tool, med(0), med(1), med(2), med(3), max(s[4] for s in samples)))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"median of {args.runs} runs; time = spawn → first ListPackages message; RSS in MiB; "
          f"+q = after ListBundles and {len(bundles)} GetBundle; `olm` = olm catalog serve, "
          f"`reg` = the olm-registry binary (the same server without the rest of olm); "
          f"`reg+c` = olm-registry restarted with its --cache-dir, beside opm serve with its own")
    print(f"{'bundles':>7} {'MiB':>5} {'ours':>4}  {'ours s':>6} {'opm s':>6} {'faster':>6}  "
          f"{'ours rss':>8} {'opm rss':>7} {'ratio':>6}  {'ours +2s':>8} {'opm +2s':>7} {'ratio':>6}  "
          f"{'ours +q':>7} {'opm +q':>7} {'ratio':>6}  {'ours peak':>9} {'opm peak':>8}")
    by = {}
    for n, size, tool, *vals in rows:
        by.setdefault((n, size), {})[tool] = vals
    for (n, size), t in by.items():
        for tool, peer, label in (("olm", "opm", "olm"), ("olm-registry", "opm", "reg"),
                                  ("reg-cache", "opm-cache", "reg+c")):
            if tool not in tools:
                continue
            o, p = t[tool], t[peer]
            print(f"{n:>7} {size:>5.0f} {label:>4}  {o[0]:>6.2f} {p[0]:>6.2f} {p[0] / o[0]:>5.1f}x  "
                  f"{o[1]:>8.1f} {p[1]:>7.1f} {p[1] / o[1]:>5.1f}x  {o[2]:>8.1f} {p[2]:>7.1f} {p[2] / o[2]:>5.1f}x  "
                  f"{o[3]:>7.1f} {p[3]:>7.1f} {p[3] / o[3]:>5.1f}x  {o[4]:>9.1f} {p[4]:>8.1f}")


if __name__ == "__main__":
    main()
