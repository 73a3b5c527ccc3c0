#!/usr/bin/env bash
# Create the Synapse venv the Matrix tests run their homeserver from, if it is missing.
# Synapse (and its Twisted stack) lives in its own venv, never in the app's env.
# Usage: bash deploy/peers/synapse.sh        (prints the venv path; fast when it exists)
#        export SYNAPSE_VENV="$(bash deploy/peers/synapse.sh)"
set -euo pipefail
cd "$(dirname "$0")/../.."

venv="${SYNAPSE_VENV:-$PWD/.venv-synapse}"
if [ -x "$venv/bin/python" ] && compgen -G "$venv/lib/python3*/site-packages/synapse/app/homeserver.py" >/dev/null; then
  echo "$venv"
  exit 0
fi
echo "creating the Synapse venv at $venv (about 20 s)" >&2
python3 -m venv "$venv"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'matrix-synapse>=1.100' >&2; then
  echo "FAILED: pip install matrix-synapse into $venv" >&2
  exit 1
fi
"$venv/bin/python" -c 'import synapse.app.homeserver' >&2 || { echo "FAILED: synapse does not import in $venv" >&2; exit 1; }
echo "$venv"
