"""The channel kit: what every channel would otherwise write again, each piece tested on its own."""
