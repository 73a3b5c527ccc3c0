"""The kit's WeChat XML: flat fields read back as written, and anything with a declaration refused."""

from __future__ import annotations

import pytest

from channels._kit.wechat_xml import read_fields, write_fields
from gateway.core.errors import InvalidEvent


def test_fields_written_are_read_back_with_cdata_and_integers():
    body = write_fields({"ToUserName": "gh_1", "Content": "a ]]> b <tag> & 中文", "CreateTime": 1700000000})
    assert b"<CreateTime>1700000000</CreateTime>" in body
    assert read_fields(body) == {"ToUserName": "gh_1", "Content": "a ]]> b <tag> & 中文", "CreateTime": "1700000000"}


@pytest.mark.parametrize("body", [
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><xml><Content>&a;</Content></xml>',
    b'<!doctype xml SYSTEM "file:///etc/passwd"><xml/>',
    b"<xml><Content>unclosed</xml>",
    b"not xml at all",
    b"<html><Content>x</Content></html>",
    b"",
])
def test_declarations_and_non_documents_are_invalid_events_not_tracebacks(body):
    with pytest.raises(InvalidEvent):
        read_fields(body)


def test_a_field_name_that_is_not_one_is_refused_when_writing():
    with pytest.raises(ValueError):
        write_fields({"a><b": "x"})
