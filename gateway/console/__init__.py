"""The teacher console: a web page on the gateway's own port where teachers sign in and see their partners.

Its parts, one job each:

* :mod:`gateway.console.access` -- the authorization model, in one place: a request's ``Viewer``;
* :mod:`gateway.console.signin` -- session cookie, CSRF tokens, forms, the sign-in rate limit;
* :mod:`gateway.console.passwords` -- argon2id hashes;
* :mod:`gateway.console.setup` -- the one-time link that creates the first administrator;
* :mod:`gateway.console.pages` -- the routes (their table and who gets what is in its docstring);
* :mod:`gateway.console.texts` -- every word shown, in English and Simplified Chinese (``texts.toml``).

Users and sessions live in the gateway's store (:mod:`gateway.store.console`, ADR 0036); the pages
are rendered on the server from ``templates/`` with the committed ``static/console.css``: no
script, no build step, no CDN.  Like the rest of ``gateway.http``, nothing here loads until the
gateway serves HTTP.
"""
