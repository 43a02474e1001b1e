"""The REST API: experiments, sweeps, serializers and the spec's OpenAPI schema."""
