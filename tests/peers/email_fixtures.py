"""Session fixtures for Dovecot (IMAP, LMTP) and the aiosmtpd SMTP server, shared by the contract suite and tests/channels/email."""
