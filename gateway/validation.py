"""Pydantic's validation errors in a teacher's words: every problem of a file, each with its place and fix.

Pydantic reports every error it finds; a teacher should see them all at once,
not one per run.  A misspelt key gets the nearest real field name
("did you mean `name`?"), found with difflib among the fields of the model
that holds the key, and a place is a plain dotted path without empty parts
(a model-wide check has no field of its own, so its place is its parent's).
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gateway.core.errors import Problem

FIXES = {
    "extra_forbidden": "remove this field or check its spelling",
    "missing": "add this field",
    "enum": "use one of the values listed",
    "literal_error": "use one of the values listed",
    "secret_literal": "put the secret in an environment variable and write env:ITS_NAME here",
}


def place(*parts: object) -> str:
    """``channels.email.inbox`` + ``()`` is ``channels.email.inbox``, never ``channels.email.inbox.``."""
    return ".".join(str(part) for part in parts if str(part) != "")


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models an annotation can hold directly (through Optional, unions and Annotated)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _models_in(get_args(annotation)[0])
    elif origin is Union or origin is types.UnionType:
        for arg in get_args(annotation):
            yield from _models_in(arg)
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation


def _step(annotation: Any, part: str | int) -> Any:
    """The annotation of ``part`` inside a value of ``annotation``, or None when it cannot be told."""
    for model in _models_in(annotation):
        if isinstance(part, str) and part in model.model_fields:
            return model.model_fields[part].annotation
    origin = get_origin(annotation)
    if origin is Annotated:
        return _step(get_args(annotation)[0], part)
    if origin is Union or origin is types.UnionType:
        for arg in get_args(annotation):
            found = _step(arg, part)
            if found is not None:
                return found
        return None
    if origin in (tuple, list) and isinstance(part, int):
        return get_args(annotation)[0]
    if origin is dict:
        return get_args(annotation)[1]
    return None


def known_fields(root: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names allowed beside the last part of ``loc`` (empty when the parent is no model)."""
    annotation: Any = root
    for part in loc[:-1]:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    return sorted({name for model in _models_in(annotation) for name in model.model_fields})


def did_you_mean(key: str, known: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return close[0] if close else None


def _fix(root: type[BaseModel], error: ErrorDetails) -> str | None:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden" and loc:
        suggestion = did_you_mean(str(loc[-1]), known_fields(root, loc))
        if suggestion is not None:
            return f"did you mean `{suggestion}`? Otherwise remove this field"
    if kind == "env_unset":
        variable = (error.get("ctx") or {}).get("variable", "NAME")
        return f"export {variable}=... in the gateway's environment before starting it"
    return FIXES.get(kind)


def _position(raw: Any, loc: Sequence[str | int]) -> tuple[int, ...]:
    """Where ``loc`` sits in the file as read (YAML keeps the file's key order); a missing key sorts last."""
    position = []
    for part in loc:
        if isinstance(raw, dict):
            keys = list(raw)
            position.append(keys.index(part) if part in keys else len(keys))
            raw = raw.get(part)
        elif isinstance(raw, list) and isinstance(part, int) and 0 <= part < len(raw):
            position.append(part)
            raw = raw[part]
        else:
            break
    return tuple(position)


def problems(error: ValidationError, root: type[BaseModel], *, raw: Any = None,
             prefix: Sequence[str | int] = ()) -> list[Problem]:
    """Every error pydantic found while validating ``raw`` as ``root``, in the file's order, each with a fix
    where one is known."""
    details = sorted(error.errors(include_url=False), key=lambda detail: _position(raw, detail["loc"]))
    return [
        Problem(place(*prefix, *detail["loc"]) or None, detail["msg"].removeprefix("Value error, "), _fix(root, detail))
        for detail in details
    ]


def describe(error: ValidationError) -> tuple[str, str]:
    """The first problem's place and message, for validators that report one (``knowledge.yaml``)."""
    first = error.errors()[0]
    return place(*first["loc"]), first["msg"].removeprefix("Value error, ")
