"""The web UI: static pages over the JSON API, served by the same app (``servecap serve``).

Every number on a page comes from ``/api/v1`` (the library the CLI uses); the pages only lay
them out. Each page keeps its state in the URL's query string, so a shared link reproduces the
view. Everything is served locally: the pages, one small script and stylesheet, and plotly.js
from the installed ``plotly`` package (no CDN, works offline).
"""

from servecap.web.mount import PAGES as PAGES
from servecap.web.mount import mount_web as mount_web
