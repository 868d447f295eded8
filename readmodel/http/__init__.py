"""The HTTP adapter: the JSON API, the export download and the web page.

Owns: the Starlette application (``sessionq serve``), its OpenAPI document,
request guards (host, token, body limits) and the static page.

Imports: the engine, :mod:`readmodel.rpc`, :mod:`readmodel.export` and the layers below.
"""
