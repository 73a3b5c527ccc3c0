"""The partner form's text fields, both ways: what a teacher typed as the console's typed change, and back.

The form is plain HTML (the pages work without script), so every value arrives as text: the model's
numbers, the owners one ``CHANNEL:USER`` a line, the tool rules as the YAML the file itself holds.
:func:`fields_of_form` turns them into :class:`gateway.configedit.PartnerFields` -- a shape problem
is worded as the config file's problems are -- and :func:`form_values` fills the form again from one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.configedit import PartnerFields
from gateway.console.edits import Refused
from gateway.core.errors import ConfigError
from gateway.validation import problems
from gateway.yamlfile import parse_yaml


def shape_error(error: ValidationError, raw: Any) -> str:
    """A form's or body's shape problems, worded as the config file's are."""
    return str(ConfigError.of(problems(error, PartnerFields, raw=raw)))


def fields_of_form(form: dict[str, str], partner_id: str) -> PartnerFields:
    """The form's fields; :class:`Refused` 400 with the problems worded as the file's would be."""
    raw: dict[str, Any] = {"id": partner_id, "name": form.get("name", ""), "persona": form.get("persona", "").strip(),
                           "greeting": form.get("greeting", "")}
    if form.get("model", "").strip():
        model = {key: form.get(key, "").strip() for key in ("model", "api_base", "api_key", "temperature",
                                                             "max_tokens", "timeout_s")}
        raw["model"] = {key: value for key, value in model.items() if value}
    rules_text = form.get("tool_rules", "")
    if rules_text.strip():
        try:
            raw["tool_rules"] = parse_yaml(rules_text, Path("tool_rules"))
        except ConfigError as error:
            raise Refused(400, str(error)) from None
    if "owners" in form:
        raw["owners"] = [owner_of(line) for line in form["owners"].splitlines() if line.strip()]
    try:
        return PartnerFields.model_validate(raw)
    except ValidationError as error:
        raise Refused(400, shape_error(error, raw)) from None

def owner_of(line: str) -> dict[str, str]:
    channel, _, user = line.strip().partition(":")
    return {"channel": channel, "user": user}

def form_values(fields: PartnerFields) -> dict[str, str]:
    """The form's text fields for ``fields``."""
    model = fields.model
    as_text = "" if not fields.tool_rules else _yaml_text([r.model_dump(mode="json", exclude_none=True)
                                                          for r in fields.tool_rules])
    return {
        "id": fields.id, "name": fields.name, "persona": fields.persona, "greeting": fields.greeting,
        "model": model.model if model else "", "api_base": (model.api_base or "") if model else "",
        "api_key": (model.api_key or "") if model else "",
        "temperature": "" if model is None or model.temperature is None else f"{model.temperature:g}",
        "max_tokens": "" if model is None or model.max_tokens is None else str(model.max_tokens),
        "timeout_s": "" if model is None or model.timeout_s is None else f"{model.timeout_s:g}",
        "tool_rules": as_text,
        "owners": "\n".join(f"{o.channel}:{o.user}" for o in fields.owners or []),
    }


def _yaml_text(value: Any) -> str:
    import yaml

    return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=None))
