"""The REST API's JSON parser: DRF's, reading with ``fedweb.inputs.loads``.

Sizes are limited before a body is read (``fedweb.errors.body_size_limit``, and DRF reads JSON and
form bodies through Django's ``request.body``, which enforces ``DATA_UPLOAD_MAX_MEMORY_SIZE``).
"""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from fedweb import inputs


class JSONParser(parsers.JSONParser):
    """JSON with a depth limit, finite numbers, 64-bit integers and storable text (``inputs.loads``)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        try:
            return inputs.loads(stream.read(), encoding)
        except inputs.JSONInputError as e:
            raise ParseError(f"JSON parse error - {e}") from None
