"""The kit's WeChat XML: flat fields read back as written, and anything with a declaration refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from channels._kit.wechat_xml import created_at, read_fields, required, write_fields
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


def test_a_sealed_answer_opens_with_the_right_key_and_token_and_not_with_another_token():
    from channels._kit.msgcrypt import WechatCrypto
    from channels._kit.wechat_xml import opened, sealed
    from gateway.core.errors import ForgedRequest

    crypto = WechatCrypto("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "wx0123456789abcdef")
    answer = sealed(write_fields({"MsgType": "text", "Content": "答案"}), crypto, "tok", timestamp="1700000000", nonce="n1")
    assert "Content" not in read_fields(answer)
    assert opened(answer, crypto, "tok") == {"MsgType": "text", "Content": "答案"}
    with pytest.raises(ForgedRequest):
        opened(answer, crypto, "another-token")


def test_a_missing_field_or_a_createtime_that_is_no_time_is_an_invalid_event():
    assert required({"MsgId": "7"}, "MsgId", source="weixin callback") == "7"
    with pytest.raises(InvalidEvent, match="weixin callback without MsgId"):
        required({"MsgId": ""}, "MsgId", source="weixin callback")
    assert created_at("1700000000", platform="wecom") == datetime.fromtimestamp(1700000000, UTC)
    with pytest.raises(InvalidEvent, match="wecom CreateTime 'soon' is not a timestamp"):
        created_at("soon", platform="wecom")
