#!/usr/bin/env bash
# Install the email channel's test peer: Dovecot (IMAP + LMTP) from Debian packages, and the
# vmail user its mail processes run as.  Idempotent; fails loudly when apt fails.  The test
# suite writes its own dovecot.conf in a temp dir and starts Dovecot itself (tests/peers/email_peer.py).
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v dovecot >/dev/null || ! command -v doveadm >/dev/null || [ ! -x /usr/lib/dovecot/lmtp ]; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq dovecot-imapd dovecot-lmtpd >/dev/null
fi
# Debian starts the system-wide Dovecot on install where systemd runs; the tests never use it.
id vmail >/dev/null 2>&1 || as_root useradd --system --no-create-home --shell /usr/sbin/nologin vmail
dovecot --version >/dev/null
