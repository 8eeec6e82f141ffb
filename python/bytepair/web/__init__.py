"""``bytepair serve``: a local page that shows how text splits into tokens, in the
manner of Tiktokenizer, working offline (every file it loads is in this package).

- ``tokens``: encodings as the page shows them (offsets, bytes, merges, differences)
- ``chat``: chat formats (ChatML for cl100k_base/o200k_base, JSON template files)
- ``server``: the HTTP server and its JSON API
- ``static/``: the page (``index.html``, ``app.js``, ``app.css``)
"""

from bytepair.web.server import Registry, make_server

__all__ = ["Registry", "make_server"]
