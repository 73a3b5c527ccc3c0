"""Property: no body sent to the partner API gets a 500, and the config file always still loads afterwards.

Hypothesis draws partner bodies -- right and wrong keys, values of every JSON type, versions right and
stale -- and sends them over real HTTP to a gateway served from a file in a thread of its own (the
examples are synchronous; the gateway keeps its own event loop between them).
"""

from __future__ import annotations

import asyncio
import queue
import re
import threading
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.configfile import load_config
from tests.console.partners_rig import serve_file, write_config
from tests.console.rig import PASSWORDS
from tests.waits import HANG_S, HTTP_S

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
FIELD = st.sampled_from(["id", "name", "persona", "greeting", "model", "tool_rules", "owners", "mid_turn", "extra"])
NUMBER = st.none() | st.integers(-5, 500) | st.floats(-1, 3, allow_nan=False) | st.sampled_from(["0.5", "x", ""])
MODEL = st.fixed_dictionaries({"model": st.sampled_from(["openai/gpt-4o-mini", "ollama/llama3", ""]) | st.text(max_size=12)},
                              optional={"api_base": st.none() | st.sampled_from(["http://127.0.0.1:9/v1", "not a url"]),
                                        "api_key": st.none() | st.sampled_from(["env:STUB_KEY", "env:UNSET_VAR_QZ", "sk-literal", "env:"]),
                                        "temperature": NUMBER, "max_tokens": NUMBER, "timeout_s": NUMBER})
RULES = st.lists(st.fixed_dictionaries(
    {"remove": st.lists(st.sampled_from(["memory_write", "schedule_reminder", ""]) | st.text(max_size=6), max_size=2)},
    optional={"kind": st.sampled_from(["direct", "group", "other"]), "group": st.none() | st.text(max_size=4),
              "role": st.sampled_from(["owner", "learner", "stranger", "teacher"]), "channel": st.text(max_size=6)}),
    max_size=2)
OWNERS = st.lists(st.fixed_dictionaries({"channel": st.sampled_from(["telegram", "webchat", "matrix", ""]),
                                         "user": st.sampled_from(["100", "@ben:school.example", ""]) | st.text(max_size=6)}),
                  max_size=2)
SHAPED = st.fixed_dictionaries(
    {"id": st.sampled_from(["algebra", "biology", "fresh-one"]) | st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
     | st.text(max_size=10), "name": st.text(max_size=12)},
    optional={"persona": st.sampled_from(["study-buddy", "socratic-math", "nope", "../etc"]), "greeting": st.text(max_size=12),
              "model": st.none() | MODEL, "tool_rules": RULES, "owners": st.none() | OWNERS})
"""Bodies of the right shape with wrong values: these reach the file's own validation."""
PARTNER = SHAPED | SHAPED | SHAPED | st.dictionaries(FIELD, JSON, max_size=5)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    path = write_config(Path(tmp_path_factory.mktemp("fuzz")))
    ready: queue.Queue[str] = queue.Queue()
    stop = threading.Event()

    def run() -> None:
        async def main() -> None:
            async with serve_file(path) as running:
                ready.put(running.url)
                while not stop.is_set():
                    await asyncio.sleep(0.05)

        asyncio.run(main())

    thread = threading.Thread(target=run, name="fuzzed-gateway", daemon=True)
    thread.start()
    url = ready.get(timeout=HANG_S)
    with httpx.Client(base_url=url, timeout=HTTP_S, trust_env=False) as http:
        page = http.get("/console/login").text
        form_token = re.search(r'name="csrf" value="([^"]*)"', page)
        assert form_token
        signed = http.post("/console/login", data={"csrf": form_token.group(1), "username": "root", "password": PASSWORDS["root"]})
        assert signed.status_code == 303
        csrf = re.search(r'name="csrf" value="([^"]*)"', http.get("/console/").text)
        assert csrf
        http.headers["x-csrf-token"] = csrf.group(1)
        yield http, path
    stop.set()
    thread.join(HANG_S)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(partner=PARTNER, fresh=st.booleans(), create=st.booleans())
def test_no_partner_body_is_a_500_and_the_file_always_loads(live, partner, fresh: bool, create: bool):
    http, path = live
    version = http.get("/console/api/partners/algebra/settings").json()["version"] if fresh else "stale"
    body = {"partner": partner, "version": version}
    answer = http.post("/console/api/partners", json=body) if create else http.put("/console/api/partners/algebra", json=body)
    assert answer.status_code < 500, (answer.status_code, answer.text)
    assert "error" in answer.json() or answer.status_code in (200, 201)
    assert "sk-literal" not in path.read_text(encoding="utf-8")
    load_config(path)  # whatever happened, the gateway could still start from the file
