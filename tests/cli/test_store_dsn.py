"""``store: postgresql://...`` in partners.yaml: the fleet's PostgreSQL store, its password from the environment.

A password written into the file is refused (and not echoed); a DSN that is not PostgreSQL's URL is a config
error; a server that cannot be reached ends ``serve`` with one line, not a traceback.
"""

from __future__ import annotations

from pathlib import Path

from gateway.configfile import parse_config
from gateway.store.choice import configured_store
from gateway.store.postgres.engine import PostgresStore
from gateway.store.sqlite import SqliteStore

SECRET = "pg-s3cr3t-7Qx9w2"


def write(workdir: Path, text: str) -> None:
    (workdir / "partners.yaml").write_text(text, encoding="utf-8")


def one_line(result) -> str:
    assert "Traceback" not in result.output
    assert SECRET not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_password_in_the_dsn_is_refused_and_not_echoed(invoke, workdir):
    write(workdir, f"store: postgresql://gateway:{SECRET}@db.internal:5432/partners\n")
    result = invoke("serve")
    assert result.exit_code == 2
    line = one_line(result)
    assert line.startswith("error: partners.yaml:store:") and "PGPASSWORD" in line, line


def test_a_password_as_a_dsn_parameter_is_refused_too(invoke, workdir):
    write(workdir, f"store: postgresql://gateway@db.internal/partners?password={SECRET}\n")
    result = invoke("serve")
    assert result.exit_code == 2
    assert "PGPASSWORD" in one_line(result)


def test_a_store_that_is_not_a_postgresql_url_is_a_config_error(invoke, workdir):
    write(workdir, "store: mysql://gateway@db.internal/partners\n")
    result = invoke("serve")
    assert result.exit_code == 2
    assert "postgresql://user@host:port/database" in one_line(result)


def test_an_unreachable_server_ends_serve_with_one_line(invoke, workdir):
    write(workdir, "store: postgresql://postgres@127.0.0.1:1/partners\n")
    result = invoke("serve")
    assert result.exit_code == 1, result.output
    line = one_line(result)
    assert line.startswith("error: postgresql store cannot be reached:") and "(fix: " in line, line


def test_the_config_selects_the_engine():
    assert isinstance(configured_store(parse_config({})), SqliteStore)
    store = configured_store(parse_config({"store": "postgresql://gateway@db.internal:5432/partners"}))
    assert isinstance(store, PostgresStore) and store.dsn == "postgresql://gateway@db.internal:5432/partners"


def test_commands_work_on_the_postgresql_store_the_config_names(invoke, workdir):
    """``partners pairing list`` reads the fleet's database, not a ``gateway.db`` of its own beside the config."""
    import asyncio

    from tests.store.engines import create_database, drop_database

    dsn = asyncio.run(create_database())
    try:
        async def ask() -> None:
            store = PostgresStore(dsn)
            await store.open()
            await store.pairing_request("relay", "a", "stranger", "S", ttl_s=600, max_pending=3)
            await store.close()

        asyncio.run(ask())
        from psycopg.conninfo import conninfo_to_dict

        part = conninfo_to_dict(dsn)
        write(workdir, f"store: postgresql://{part['user']}@{part['host']}:{part.get('port', 5432)}/{part['dbname']}\n")
        result = invoke("pairing", "list")
        assert result.exit_code == 0, result.output
        assert "stranger" in result.output
        assert not list(workdir.rglob("gateway.db"))
    finally:
        asyncio.run(drop_database(dsn))
