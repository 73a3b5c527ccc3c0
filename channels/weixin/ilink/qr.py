"""The login's QR code drawn from the link the platform hands out: half-block text for a terminal, SVG for a page.

The platform's ``get_bot_qrcode`` answer carries ``qrcode`` (the id the status
calls name) and ``qrcode_img_content`` -- despite its name, the link a WeChat
scan opens, not an image.  That link is what the code encodes.  ``qrcode`` is
imported here, lazily, so only a login pays for it.
"""

from __future__ import annotations

import io

BORDER = 1
"""Quiet modules around the code: one keeps the terminal block compact and still scans (the dark terminal frames it)."""


def terminal(link: str) -> str:
    """The code as lines of half-block characters, two modules to a character row, dark modules light (invert)."""
    import qrcode

    code = qrcode.QRCode(border=BORDER)
    code.add_data(link)
    out = io.StringIO()
    code.print_ascii(out=out, invert=True)
    return out.getvalue().rstrip("\n")


def svg(link: str) -> str:
    """The code as one inline ``<svg>`` element (paths, no raster library), sized by the page."""
    import qrcode
    from qrcode.image.svg import SvgPathImage

    image = qrcode.make(link, image_factory=SvgPathImage, border=2)
    return image.to_string(encoding="unicode")
