"""`partners console add-user` and `users`: console accounts made from the terminal, against the real store."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from gateway.store.console import ConsoleUser, Role
from gateway.store.sqlite import SqliteStore

NEW_PASSWORD = "cli-admin-pw-onyx-6604"

def users_in(db: Path) -> list[ConsoleUser]:
    async def read() -> list[ConsoleUser]:
        store = SqliteStore(db)
        await store.open()
        try:
            return await store.console_users()
        finally:
            await store.close()

    return asyncio.run(read())


CONFIG = """data_dir: data
partners:
  - id: algebra
    name: Algebra
    owners: [{channel: telegram, user: "100"}]
"""


@pytest.fixture
def configured(workdir: Path) -> Path:
    (workdir / "partners.yaml").write_text(CONFIG, encoding="utf-8")
    return workdir / "data" / "gateway.db"


def test_add_user_reads_the_password_from_stdin(invoke, configured: Path):
    result = invoke("console", "add-user", "Ada", "--role", "teacher", "--teacher", "telegram:100", "--password-stdin",
                    input=NEW_PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    assert "Added teacher ada" in result.output and NEW_PASSWORD not in result.output
    [ada] = users_in(configured)
    assert (ada.username, ada.role, ada.teacher, ada.disabled) == ("ada", Role.TEACHER, "telegram:100", False)
    again = invoke("console", "add-user", "ada", "--role", "administrator", "--password-stdin", input=NEW_PASSWORD + "\n")
    assert again.exit_code == 1 and "already a console user ada" in again.output
    listed = invoke("console", "users")
    assert re.search(r"^ada\s+ada\s+teacher\s+telegram:100\s+active", listed.output, re.M), listed.output


def test_add_user_asks_twice_and_saves_nothing_when_the_two_differ(invoke, configured: Path, monkeypatch):
    answers = iter([NEW_PASSWORD, NEW_PASSWORD + "-typo"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    result = invoke("console", "add-user", "root", "--role", "administrator")
    assert result.exit_code == 1 and "not the same" in result.output
    assert not configured.exists() or users_in(configured) == []
    answers = iter([NEW_PASSWORD, NEW_PASSWORD])
    assert invoke("console", "add-user", "root", "--role", "administrator").exit_code == 0
    assert [u.role for u in users_in(configured)] == [Role.ADMINISTRATOR]


@pytest.mark.parametrize(("args", "said"), [
    (("--role", "teacher"), "a teacher needs --teacher"),
    (("--role", "teacher", "--teacher", "telegram"), "is not CHANNEL:USER"),
    (("--role", "teacher", "--teacher", "telegram:999"), "no partner lists telegram:999"),
    (("--role", "administrator", "--teacher", "telegram:100"), "--teacher is for --role teacher"),
])
def test_add_user_refuses_a_teacher_who_would_see_nothing(invoke, configured: Path, args, said):
    result = invoke("console", "add-user", "ben", *args, "--password-stdin", input=NEW_PASSWORD + "\n")
    assert result.exit_code == 1 and said in result.output, result.output


def test_add_user_refuses_a_short_password(invoke, configured: Path):
    result = invoke("console", "add-user", "ben", "--role", "administrator", "--password-stdin", input="short\n")
    assert result.exit_code == 1 and "10 to 1024 characters" in result.output


