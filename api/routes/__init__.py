"""The REST resources under /v1, one module per resource; api/app.py mounts their routers."""
