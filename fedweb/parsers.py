"""The REST API's body parsers: DRF's, with a size limit and ``fedweb.inputs.loads`` for JSON.

DRF reads the request stream itself, bypassing Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check
(which only guards ``request.body`` and ``request.POST``), so the limit is applied here too.
"""

from __future__ import annotations

from django.conf import settings
from django.http import QueryDict
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError

from fedweb import inputs


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


def too_large_message() -> str:
    """The one message for a body over the limit, for the API and the pages alike."""
    return f"The request body is larger than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes"


def check_announced_length(parser_context: dict | None) -> None:
    """``PayloadTooLarge`` if the request's Content-Length exceeds the limit, before reading anything."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    request = (parser_context or {}).get("request")
    announced = inputs.parse_int(request.META.get("CONTENT_LENGTH", ""), minimum=0) if request is not None else None
    if limit is not None and (announced or 0) > limit:
        raise PayloadTooLarge(too_large_message())


def read_limited(stream, parser_context: dict | None) -> bytes:
    """The whole body, or ``PayloadTooLarge`` if it (or its announced length) exceeds the limit."""
    check_announced_length(parser_context)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(body) > limit:
        raise PayloadTooLarge(too_large_message())
    return body


class JSONParser(parsers.JSONParser):
    """JSON with a depth limit, finite numbers, 64-bit integers and storable text (``inputs.loads``)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        try:
            return inputs.loads(read_limited(stream, parser_context), encoding)
        except inputs.JSONInputError as e:
            raise ParseError(f"JSON parse error - {e}") from None


class FormParser(parsers.FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        return QueryDict(read_limited(stream, parser_context), encoding=encoding)


class MultiPartParser(parsers.MultiPartParser):
    # Django's multipart parser limits the fields itself, but would spool any file parts to disk:
    # the API takes no files, so the announced length is held to the same limit.
    def parse(self, stream, media_type=None, parser_context=None):
        check_announced_length(parser_context)
        return super().parse(stream, media_type, parser_context)
