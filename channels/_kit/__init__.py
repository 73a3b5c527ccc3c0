"""The channel kit: the pieces every channel would otherwise write again, each tested on its own.

A channel imports what it needs from here; the kit imports only the shared
vocabulary (``gateway.messages``, ``gateway.errors``, ``gateway.capabilities``,
soon ``gateway.core.*``) and third-party libraries, never a channel and never
the application.  Platform numbers (signature windows, ack deadlines) are not
in the kit either: the channel reads them from ``channels/platforms.toml`` and
hands them in.

==========================  ====================================================
``replay``                  a bounded memory of signatures already seen
``signatures``              HMAC-SHA256 with a timestamp window (Slack v0 and a
                            generic form), Meta's ``X-Hub-Signature-256``,
                            Ed25519 over timestamp + body (Discord, QQ),
                            Feishu's SHA-256 signature, WeChat's sorted SHA-1
``msgcrypt``                AES-CBC message encryption: WeChat/WeCom
                            (EncodingAESKey, receive id checked) and Feishu
                            (``{"encrypt": ...}`` with SHA-256 of the key)
``wechat_xml``              the flat XML of WeChat and WeCom callbacks, read with
                            declarations refused; answers sealed for safe mode
``jwks``                    a JWT checked against a JWKS fetched and cached with
                            httpx (Bot Framework / Teams)
``challenges``              the URL handshakes: Meta's ``hub.challenge``,
                            WeChat's and WeCom's ``echostr``, Slack's and Feishu's
                            ``url_verification``
``ack``                     durable, then 2xx: ``sink.accept`` and the answer,
                            timed against the platform's ack deadline
``http_errors``             an HTTP answer -> the gateway's error tree:
                            ``Retry-After`` in all its forms, error codes inside
                            200 bodies, one meaning for 401 and 403
``media``                   inbound files after the ack: a streamed download
                            stopped at the limit whatever ``Content-Length``
                            says, and file names safe to keep (ADR 0026)
``retry``                   retries in place for the transports below, with
                            ``RetryPolicy``'s one backoff; a wait is a sign of life
``longpoll``                fetch -> ``sink.accept`` -> cursor, then fetch again
                            (Telegram, Matrix's ``/sync``, the relay test platform)
``websocket``               a socket gateway's session: identify or resume from
                            the cursor store, ack after accept, heartbeats,
                            reconnect (QQ, OneBot/NapCat, Mochat, DingTalk-style)
``languages``               the preferred tag of an ``Accept-Language`` or
                            ``Content-Language`` value (web chat, email)
==========================  ====================================================

Every verifier compares in constant time and fails with exactly one error,
:class:`gateway.errors.ForgedRequest` with a ``reason``, which the HTTP app
answers with 401 (403 for a wrong verify token) -- never a traceback.
"""
