"""`partners console token create|list|revoke`: API tokens made on the server, against the real store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.console.tokens import PREFIX
from gateway.store.sqlite import SqliteStore

PASSWORD = "cli-token-pw-basalt-2217"
CONFIG = """data_dir: data
partners:
  - id: algebra
    name: Algebra
    owners: [{channel: telegram, user: "100"}]
"""


def user_of(db: Path, secret: str) -> str | None:
    async def read() -> str | None:
        store = SqliteStore(db)
        await store.open()
        try:
            found = await store.api_token_user(secret)
            return found[0].username if found else None
        finally:
            await store.close()

    return asyncio.run(read())


@pytest.fixture
def db(workdir: Path, invoke) -> Path:
    (workdir / "partners.yaml").write_text(CONFIG, encoding="utf-8")
    added = invoke("console", "add-user", "ada", "--role", "teacher", "--teacher", "telegram:100", "--password-stdin",
                   input=PASSWORD + "\n")
    assert added.exit_code == 0, added.output
    return workdir / "data" / "gateway.db"


def test_create_prints_the_token_once_list_never_shows_it_and_revoke_ends_it(invoke, db: Path):
    made = invoke("console", "token", "create", "Ada", "backup-job", "--expires-in-days", "7")
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip()
    assert secret.startswith(PREFIX) and "\n" not in secret  # stdout is the token alone, for a script to capture
    assert "shown this once" in made.stderr
    assert user_of(db, secret) == "ada"
    listed = invoke("console", "token", "list")
    assert listed.exit_code == 0 and "backup-job" in listed.output and "ada" in listed.output
    assert secret not in listed.output and secret[len(PREFIX):] not in listed.output
    token_id = next(line.split()[0] for line in listed.output.splitlines() if "backup-job" in line)
    revoked = invoke("console", "token", "revoke", token_id)
    assert revoked.exit_code == 0, revoked.output
    assert user_of(db, secret) is None
    assert "No API tokens" in invoke("console", "token", "list").output


def test_refusals_say_why(invoke, db: Path):
    nobody = invoke("console", "token", "create", "nobody", "backup-job")
    assert nobody.exit_code == 1 and "no console user nobody" in nobody.output
    unnamed = invoke("console", "token", "create", "ada", "   ")
    assert unnamed.exit_code == 1 and "1 to 64 characters" in unnamed.output
    gone = invoke("console", "token", "revoke", "0123456789abcdef")
    assert gone.exit_code == 1 and "no token 0123456789abcdef" in gone.output
    assert invoke("console", "token", "create", "ada", "x", "--expires-in-days", "0").exit_code == 2  # click's range check
