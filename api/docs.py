"""``/docs`` (Swagger UI) and ``/redoc`` served air-gapped: every asset comes from this server.

FastAPI's default pages load Swagger UI, ReDoc, a favicon and Google Fonts from CDNs, so the docs are
blank without internet. The assets here are the files shipped in the ``fastapi-offline`` package
(``fastapi_offline/static``: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png),
mounted at :data:`ASSETS`; the pages are FastAPI's own HTML with those local URLs and no web fonts.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"


def assets_dir() -> str:
    return str(resources.files("fastapi_offline") / "static")


def install(app: FastAPI) -> None:
    """Mount the assets and add ``/docs`` and ``/redoc`` (create the app with docs_url=redoc_url=None)."""
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from validator.swagger.io
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url, title=f"{app.title} - ReDoc", redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False,
        )
