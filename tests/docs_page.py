"""Reading the /docs page as a browser would: every URL it makes the browser load.

Shared by tests/api/test_docs_offline.py (TestClient) and tests/test_wheel_docs.py (a real server
installed from the wheel).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

# Hosts a Swagger UI page loads from when it is not self-hosted (FastAPI's defaults, the usual
# CDNs, web fonts) and Swagger UI's online validator; none may appear in what /docs loads.
OUTSIDE_HOSTS = (
    "cdn.jsdelivr.net",
    "unpkg.com",
    "cdnjs.cloudflare.com",
    "fonts.googleapis.com",
    "fonts.gstatic.com",
    "fastapi.tiangolo.com",
)
ABSOLUTE_URL = re.compile(r"""(?:https?:)?//[^\s'"<>()]+""")
# The spec URL and the OAuth2 redirect of the page's inline SwaggerUIBundle({...}) call.
SCRIPT_URLS = (
    re.compile(r"""\burl:\s*'([^']*)'"""),
    re.compile(r"""oauth2RedirectUrl:\s*window\.location\.origin\s*\+\s*'([^']*)'"""),
)
CONTENT_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".json": "application/json",
}


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def page_urls(html: str) -> list[str]:
    """Every URL the page loads: src and href attributes, and the URLs its inline script uses."""
    parser = _Links()
    parser.feed(html)
    script_urls = [
        match
        for script in parser.scripts
        for regex in SCRIPT_URLS
        for match in regex.findall(script)
    ]
    assert script_urls, "the page's inline script names no spec URL"
    return parser.urls + script_urls


def absolute_urls(text: str) -> list[str]:
    """Every absolute (or scheme-relative) URL written in `text`."""
    return ABSOLUTE_URL.findall(text)


def is_same_origin(url: str, origin: str | None = None) -> bool:
    """Whether `url` is a path on the page's own server (relative, or on `origin`)."""
    parts = urlsplit(url)
    if not parts.scheme and not parts.netloc:
        return url.startswith("/")
    return origin is not None and f"{parts.scheme}://{parts.netloc}" == origin


def expected_content_type(url: str) -> str:
    """The media type an asset URL must be served with, by its suffix (HTML otherwise)."""
    path = urlsplit(url).path
    return next(
        (kind for suffix, kind in CONTENT_TYPES.items() if path.endswith(suffix)), "text/html"
    )
