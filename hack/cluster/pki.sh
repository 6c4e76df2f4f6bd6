# Certificates for the local control plane, made with openssl. Sourced by `up`.
# One cluster CA signs serving and client certs; a separate front-proxy CA signs the
# aggregator's client cert, so aggregated API servers (packagemanifests) can trust
# requestheader identities without trusting every cluster client.

# issue_cert NAME CN ORG SANS(comma list, may be empty) CA USAGE(server|client|both)
issue_cert() {
  local name="$1" cn="$2" org="$3" sans="$4" ca="$5" usage="$6" dir="$CLUSTER_DIR/pki"
  [[ -s "$dir/$name.crt" ]] && return
  local subj="/CN=$cn"; [[ -n "$org" ]] && subj="/O=$org$subj"
  local eku
  case "$usage" in
    server) eku="serverAuth" ;; client) eku="clientAuth" ;; both) eku="serverAuth,clientAuth" ;;
  esac
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n "$sans" ]] && echo "subjectAltName=$sans"
  } >"$dir/$name.ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/$name.key" -subj "$subj" \
    -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" \
    -CAcreateserial -days 3650 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

issue_ca() {
  local name="$1" cn="$2" dir="$CLUSTER_DIR/pki"
  [[ -s "$dir/$name.crt" ]] && return
  openssl req -x509 -new -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$cn" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -keyout "$dir/$name.key" -out "$dir/$name.crt" 2>/dev/null
}

make_pki() {
  mkdir -p "$CLUSTER_DIR/pki"
  issue_ca ca "olm-rs-cluster-ca"
  issue_ca front-proxy-ca "olm-rs-front-proxy-ca"
  # Reissued when the Service range changed (the kubernetes Service's IP is a SAN).
  if [[ -s "$CLUSTER_DIR/pki/apiserver.crt" ]] &&
    ! openssl x509 -in "$CLUSTER_DIR/pki/apiserver.crt" -noout -ext subjectAltName |
      grep -q "IP Address:$SERVICE_IP\(,\|$\)"; then
    rm -f "$CLUSTER_DIR/pki/apiserver.crt"
  fi
  issue_cert apiserver kube-apiserver "" \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SERVICE_IP" \
    ca server
  issue_cert admin olm-rs-admin system:masters "" ca client
  issue_cert controller-manager system:kube-controller-manager "" "" ca client
  issue_cert scheduler system:kube-scheduler "" "" ca client
  # The API server's identity towards kubelets (logs, exec, port-forward on a real node).
  issue_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" ca client
  issue_cert front-proxy-client front-proxy-client "" "" front-proxy-ca client
  if [[ ! -s "$CLUSTER_DIR/pki/sa.key" ]]; then
    openssl genrsa -out "$CLUSTER_DIR/pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$CLUSTER_DIR/pki/sa.key" -pubout -out "$CLUSTER_DIR/pki/sa.pub" 2>/dev/null
  fi
}

# write_kubeconfig FILE CERTNAME: a kubeconfig with the certs embedded, so it works from
# anywhere (tests, kubectl, the olm binary) without relative paths.
write_kubeconfig() {
  local file="$1" cert="$2" dir="$CLUSTER_DIR/pki"
  cat >"$file" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: olm-rs
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$dir/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 "$dir/$cert.crt")
    client-key-data: $(base64 -w0 "$dir/$cert.key")
contexts:
- name: olm-rs
  context: {cluster: olm-rs, user: $cert}
current-context: olm-rs
YAML
}
