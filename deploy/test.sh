#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run the whole suite.
# Usage: bash deploy/test.sh [pytest args]
# Services a test needs are installed and started here (or by the test's own fixtures);
# a missing service is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian keeps daemons (dovecot, the email tests' peer) in sbin, which a non-login shell's PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

venv="${PARTNERS_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# The tests cover the optional engines too (ADR 0016): lightrag, and local-embeddings, which brings
# sentence-transformers, and so torch: take a CPU build from /opt/wheels when the machine has one
# (PyPI's Linux torch is the CUDA build, gigabytes of it), else plain PyPI.
pyver="$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
cpu_torch="$(ls /opt/wheels/torch-*+cpu-cp"$pyver"-cp"$pyver"-*linux*_x86_64.whl 2>/dev/null | sort -V | tail -n 1 || true)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check ${cpu_torch:+"$cpu_torch"} \
  -e '.[test,lightrag,local-embeddings,telegram,discord,email,matrix,slack,wecom,dingtalk,feishu,mochat,postgresql,deploy]'

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Chromium (Debian's package) for the webchat browser test; Playwright never downloads a browser here.
if [ ! -x /usr/bin/chromium ]; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
fi

export SYNAPSE_VENV="$(bash deploy/peers/synapse.sh)"  # the Matrix tests' homeserver, in its own venv
bash deploy/peers/dovecot.sh  # the email tests' IMAP/LMTP server (apt) and its vmail user
bash deploy/peers/postgresql.sh  # the PostgreSQL store tests' server (apt), loopback trust
# The container test (tests/deploy): podman with runc, and debootstrap for the local base image (no registry here).
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || [ ! -x /usr/sbin/debootstrap ]; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq podman runc debootstrap >/dev/null
fi
exec "$venv/bin/python" -m pytest "$@"
