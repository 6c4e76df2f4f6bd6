# Shared settings for hack/opm scripts. Sourced, not run.
# Upstream opm (operator-registry) is a reference tool for differential tests and
# benchmarks. Its version is pinned in tools/go.mod; the binary is cached outside the
# repo keyed by that version and the exact module graph and build settings.
set -euo pipefail

HACK_OPM_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_OPM_DIR/../.." && pwd)"
CACHE_ROOT="${OLM_RS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs}"

OPM_MODULE=github.com/operator-framework/operator-registry
OPM_PKG=$OPM_MODULE/cmd/opm
# Loopback registry + image pusher for rendering catalog templates (see tools/go.mod).
CRANE_PKG=github.com/google/go-containerregistry/cmd/crane
# The single source of truth for the version is tools/go.mod.
OPM_VERSION="$(awk -v m="$OPM_MODULE" '$1 == m { print $2; exit }' "$HACK_OPM_DIR/tools/go.mod")"

# go-sqlite3 (still linked into opm for the deprecated sqlite index commands) needs cgo;
# without it those commands fail at run time. gcc is enough: no other C library is used.
# containers_image_openpgp drops the gpgme C binding; json1 matches upstream's Makefile.
OPM_CGO_ENABLED=1
OPM_TAGS=json1,containers_image_openpgp

# The key covers the module graph and the build settings above.
OPM_KEY="$({ cat "$HACK_OPM_DIR/tools/go.mod" "$HACK_OPM_DIR/tools/go.sum"
             echo "cgo=$OPM_CGO_ENABLED tags=$OPM_TAGS"; } | sha256sum | cut -c1-12)"
OPM_BIN_DIR="$CACHE_ROOT/opm-$OPM_VERSION-$OPM_KEY/bin"
OPM_BIN="$OPM_BIN_DIR/opm"
CRANE_BIN="$OPM_BIN_DIR/crane"

export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=mod"

log() { printf '[opm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
