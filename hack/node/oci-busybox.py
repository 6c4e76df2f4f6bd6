#!/usr/bin/env python3
"""Writes an OCI image layout with two tiny images made from Debian's static busybox:
  busybox  - /bin/busybox with applet links (sh, wget, sleep, cat, ...), Cmd ["sh"]
  pause    - the same layer, Entrypoint ["/bin/sleep", "infinity"]: the pod sandbox image
             (containerd stops sandboxes with SIGKILL, so a PID 1 without signal handlers is fine)
  kubectl  - busybox plus a second layer with a static /bin/kubectl (when KUBECTL_PATH is given):
             a client that uses in-cluster config and checks the API server's certificate
             (busybox wget's own TLS cannot talk to Go's TLS server: handshake failure, alert 40)
Deterministic: fixed mtimes and owners, so the digests only change with the busybox binary.
Usage: oci-busybox.py LAYOUT_DIR BUSYBOX_PATH [KUBECTL_PATH]"""
import gzip, hashlib, io, json, os, sys, tarfile

layout = sys.argv[1]
busybox = sys.argv[2]
kubectl = sys.argv[3] if len(sys.argv) > 3 else None
APPLETS = ["sh", "sleep", "wget", "cat", "echo", "ls", "env", "id", "hostname", "ip", "nc", "true", "false"]

def blob(data):
    d = hashlib.sha256(data).hexdigest()
    os.makedirs(f"{layout}/blobs/sha256", exist_ok=True)
    with open(f"{layout}/blobs/sha256/{d}", "wb") as f:
        f.write(data)
    return "sha256:" + d, len(data)

def layer(files):
    """files: (name, kind, mode, data, link) tuples -> (descriptor, diff_id) of a gzip layer."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, mode, data, link in files:
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = kind, mode, 0, 0, 0, "", ""
            ti.linkname = link
            ti.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    tar_bytes = raw.getvalue()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as g:
        g.write(tar_bytes)
    d, size = blob(gz.getvalue())
    return {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": size}, \
        "sha256:" + hashlib.sha256(tar_bytes).hexdigest()

files = [(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755, b"", "")
         for d in ["bin", "etc", "tmp", "var", "proc", "sys", "dev"]]
files.append(("bin/busybox", tarfile.REGTYPE, 0o755, open(busybox, "rb").read(), ""))
files += [(f"bin/{a}", tarfile.SYMTYPE, 0o777, b"", "busybox") for a in APPLETS]
files.append(("etc/passwd", tarfile.REGTYPE, 0o644, b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", ""))
files.append(("etc/group", tarfile.REGTYPE, 0o644, b"root:x:0:\nnobody:x:65534:\n", ""))
base = layer(files)
images = [("busybox", [base], {"Cmd": ["sh"]}), ("pause", [base], {"Entrypoint": ["/bin/sleep", "infinity"]})]
if kubectl:
    kl = layer([("bin", tarfile.DIRTYPE, 0o755, b"", ""),
                ("bin/kubectl", tarfile.REGTYPE, 0o755, open(kubectl, "rb").read(), "")])
    images.append(("kubectl", [base, kl], {"Cmd": ["kubectl", "version"]}))

manifests = []
for tag, layers, cfg in images:
    cfg = dict(cfg, Env=["PATH=/bin"], WorkingDir="/")
    config = {"architecture": "amd64", "os": "linux", "config": cfg,
              "rootfs": {"type": "layers", "diff_ids": [l[1] for l in layers]},
              "history": [{"created_by": "hack/node/oci-busybox.py"}]}
    cd, cs = blob(json.dumps(config, sort_keys=True).encode())
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
                "layers": [l[0] for l in layers]}
    md, ms = blob(json.dumps(manifest, sort_keys=True).encode())
    manifests.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms,
                      "platform": {"architecture": "amd64", "os": "linux"},
                      "annotations": {"org.opencontainers.image.ref.name": tag}})
with open(f"{layout}/index.json", "w") as f:
    json.dump({"schemaVersion": 2, "manifests": manifests}, f)
with open(f"{layout}/oci-layout", "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
