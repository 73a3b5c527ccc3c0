"""How to install one of the package's optional extras, said so that it works when pasted.

Until a release is published, teachers install from a checkout (``pip install -e .``),
where ``pip install 'partners-gateway[telegram]'`` would fetch nothing or something
else.  So the command names this environment's own pip and, for an editable install,
the checkout it was installed from; a regular install gets the package name.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "partners-gateway"


@cache
def _checkout() -> Path | None:
    """The folder this package was installed from in editable mode, if it was (PEP 610's direct_url.json)."""
    # Every copy of the metadata on the path: a checkout on sys.path also shows its own egg-info, without it.
    found = (d.read_text("direct_url.json") for d in metadata.distributions(name=DISTRIBUTION))
    raw = next((text for text in found if text), None)
    if raw is None:
        return None
    try:
        origin = json.loads(raw)
    except ValueError:
        return None
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    editable = isinstance(origin, dict) and bool((origin.get("dir_info") or {}).get("editable"))
    if not editable or not url.startswith("file:"):
        return None
    return Path(unquote(urlparse(url).path))


def _pip() -> str:
    pip = Path(sys.executable).parent / "pip"
    return str(pip) if pip.exists() else "pip"


def install_command(extra: str) -> str:
    """``/srv/partners/.venv/bin/pip install -e '/srv/partners[telegram]'`` (or the package name when not editable)."""
    checkout = _checkout()
    if checkout is not None:
        return f"{_pip()} install -e '{checkout}[{extra}]'"
    return f"{_pip()} install '{DISTRIBUTION}[{extra}]'"
