"""A self-built app runs on a machine without wecom-aibot-sdk; an AI bot there is refused with the command.

Each case runs a real ``partners`` process whose ``sitecustomize`` marks
``wecom_aibot_sdk`` as absent (``sys.modules[name] = None``: ``import`` fails and
``importlib.util.find_spec`` answers None, as for a package never installed) --
the test's own interpreter keeps the SDK.  The app's learner writes through the
emulated WeCom (real HTTP both ways) and is answered; the AI bot's account
stops ``partners serve`` before it binds, naming the ``wecom`` extra and the
command that installs it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import yaml

from gateway.extras import install_command
from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import gateway_env, wait_until
from tests.extras import need_module
from tests.peers.tencent_api import serving
from tests.peers.wecom_app_server import WecomApp
from tests.waits import HANG_S

BLOCK = 'import sys\nsys.modules["wecom_aibot_sdk"] = None  # as if the wecom extra were not installed\n'
PARTNERS = str(Path(sys.executable).with_name("partners"))


def without_sdk(tmp_path: Path, **secrets: str) -> dict[str, str]:
    """The gateway's environment, with a ``sitecustomize`` first on the path that hides the SDK."""
    site = tmp_path / "no-sdk"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCK)
    env = gateway_env(**secrets)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    return env


def write_config(tmp_path: Path, mode: dict) -> Path:
    path = tmp_path / "partners.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "wecom", "account": "school"}],
        "channels": {"wecom": {"school": {"mode": mode, "access": {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    }))
    return path


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PARTNERS, *args], env=env, capture_output=True, text=True, timeout=HANG_S)


def test_the_block_really_hides_the_sdk(tmp_path):
    need_module("wecom_aibot_sdk")  # the test's own interpreter has it: the block is what hides it
    env = without_sdk(tmp_path)
    probe = "import importlib.util; assert importlib.util.find_spec('wecom_aibot_sdk') is None; import wecom_aibot_sdk"
    hidden = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=HANG_S)
    assert hidden.returncode == 1 and "ModuleNotFoundError" in hidden.stderr, hidden.stderr
    shown = subprocess.run([sys.executable, "-c", "import wecom_aibot_sdk"], capture_output=True, timeout=HANG_S)
    assert shown.returncode == 0


def test_channels_lists_the_app_as_available_and_the_ai_bot_with_the_extras_command(tmp_path):
    listing = run(without_sdk(tmp_path), "channels")
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0] + " " + line.split()[1]: line for line in listing.stdout.splitlines() if line.startswith("wecom")}
    assert " yes " in rows["wecom (app)"]
    bot = rows["wecom (ai_bot)"]
    assert " no " in bot and "`wecom` extra" in bot and install_command("wecom") in bot


async def test_a_self_built_app_answers_a_learner_without_the_sdk(tmp_path):
    peer = WecomApp()
    async with serving(peer) as api_base:
        env = without_sdk(tmp_path, WECOM_APP_SECRET=peer.corpsecret, WECOM_APP_TOKEN=peer.token,
                          WECOM_APP_AES_KEY=peer.aes_key)
        config = write_config(tmp_path, {
            "kind": "app", "corpid": peer.corpid, "corpsecret": "env:WECOM_APP_SECRET", "agentid": peer.agentid,
            "token": "env:WECOM_APP_TOKEN", "encoding_aes_key": "env:WECOM_APP_AES_KEY", "api_base": api_base})
        gateway = GatewayProcess(tmp_path, config, env)
        try:
            await gateway.start()
            peer.callback_url = f"{gateway.url}/webhooks/wecom/school"
            await peer.say("lisi", "没有 SDK 也能答吗")
            await wait_until(lambda: bool(peer.texts_to("lisi")), within=HANG_S, what="the app's answer")
        finally:
            await gateway.stop()
    assert peer.texts_to("lisi") == ["answering: 没有 SDK 也能答吗"]
    log = (tmp_path / "gateway-1.log").read_text(errors="replace")
    assert "wecom_aibot_sdk" not in log and "Traceback" not in log


async def test_an_ai_bot_account_without_the_sdk_stops_serve_naming_the_extra(tmp_path):
    env = without_sdk(tmp_path, WECOM_BOT_SECRET="bot-secret-q7x")
    config = write_config(tmp_path, {"kind": "ai_bot", "bot_id": "bot-q7x", "secret": "env:WECOM_BOT_SECRET",
                                     "ws_url": "ws://127.0.0.1:9/"})
    served = await asyncio.to_thread(run, env, "--config", str(config), "serve", "--port", "0")
    assert served.returncode != 0
    said = served.stderr
    assert "wecom/school" in said and "`wecom` extra" in said and install_command("wecom") in said, said
    assert "kind: app" in said and "Traceback" not in said
