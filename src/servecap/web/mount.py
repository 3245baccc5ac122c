"""Routes for the pages, their static files and the bundled plotly.js."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, RedirectResponse, Response

PAGES = ("plan", "compare", "simulate", "fleet", "fleet-plan", "runs")
_STATIC = Path(str(resources.files("servecap.web").joinpath("static")))


def _plotly_js() -> Path:
    """plotly.min.js as the installed plotly package ships it (the same the HTML reports embed)."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.exists():
        raise HTTPException(status_code=500, detail="plotly.min.js is missing from the plotly package")
    return path


def mount_web(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse("/plan")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return FileResponse(_STATIC / "favicon.svg", media_type="image/svg+xml")

    def page_route(name: str) -> None:
        @app.get(f"/{name}", include_in_schema=False, name=f"page_{name}")
        def page() -> FileResponse:
            return FileResponse(_STATIC / f"{name}.html", media_type="text/html")

    for name in PAGES:
        page_route(name)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name == "plotly.min.js":
            return FileResponse(_plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})
        path = _STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise HTTPException(status_code=404, detail=f"no such file: {name}")
        kind = {"js": "text/javascript", "css": "text/css", "svg": "image/svg+xml"}.get(path.suffix[1:], "text/plain")
        return FileResponse(path, media_type=kind)
