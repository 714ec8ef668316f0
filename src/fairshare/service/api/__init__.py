"""The HTTP API (FastAPI): `create_app(store)`; OpenAPI at /openapi.json, interactive docs at /docs."""
