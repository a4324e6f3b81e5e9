"""The evaluation corpus and its offline web: documents loaded from a folder,
served on loopback, searched through the real tavily-python client, crawled
by the real crawl activity."""

from __future__ import annotations

import http.client
from pathlib import Path

import httpx
import pytest
from tavily import TavilyClient

from activities.crawl import CrawlActivities
from client.evaluation.corpus import load_corpus
from client.evaluation.web import CorpusWeb, passages, terms
from infra.blobs import FileBlobStore
from workflows.tool_models import CrawlRequest

FILES = {
    "towns/brackwater.md": "# Brackwater\n\nBrackwater is a harbour town of 8,300 people on the Selm estuary.\n\n"
    "Its lighthouse, the Greyhorn Light, was first lit in 1871.\n",
    "firms/olvane.html": "<html><head><title>Olvane Instruments</title><style>.x{color:red}</style>"
    "<script>var secret = 'script text';</script></head><body><h1>Olvane Instruments Ltd</h1>"
    "<p>Olvane Instruments builds the Tern-4 tide gauge.</p><table><tr><th>Year</th><th>Units</th></tr>"
    "<tr><td>2021</td><td>1,240</td></tr></table></body></html>",
    "notes/readme.txt": "Field notes, spring season\n\nThe spring count of grey seals at Hallow Point was 312.\n",
    "zh/qiaocun.md": "# 桥村简介\n\n桥村位于塞尔姆河口北岸，以养殖牡蛎闻名。2022年桥村的牡蛎产量为四百二十吨。\n",
    "firms/other.md": "# Kestrel Mills\n\nKestrel Mills makes rope and sailcloth for the harbour trade.\n",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "ignored.json").write_text("{}")
    (tmp_path / "secret.md").write_text("# Secret\n\nnot on the web\n")
    return folder


@pytest.fixture
def web(corpus: Path):
    with CorpusWeb(corpus) as server:
        yield server


def test_a_link_out_of_the_folder_is_not_in_the_corpus(corpus):
    (corpus / "towns" / "secret.md").symlink_to(corpus.parent / "secret.md")
    assert "towns/secret.md" not in {d.path for d in load_corpus(corpus)}


def test_load_corpus_titles_and_text(corpus):
    documents = {d.path: d for d in load_corpus(corpus)}
    assert sorted(documents) == sorted(FILES)
    assert documents["towns/brackwater.md"].title == "Brackwater"
    html = documents["firms/olvane.html"]
    assert html.title == "Olvane Instruments"
    assert "Tern-4 tide gauge" in html.text and "1,240" in html.text
    assert "script text" not in html.text and "color:red" not in html.text
    assert html.media_type.startswith("text/html")
    assert documents["notes/readme.txt"].title == "Field notes, spring season"
    assert documents["zh/qiaocun.md"].title == "桥村简介"


def test_a_document_saved_with_a_byte_order_mark_keeps_its_title(tmp_path):
    (tmp_path / "bom.md").write_text("# Harbour notes\n\nThe tide.\n", encoding="utf-8-sig")
    (tmp_path / "bom.html").write_text("<html><title>Ferry page</title><p>A ferry.</p></html>", encoding="utf-8-sig")
    documents = {d.path: d for d in load_corpus(tmp_path)}
    assert documents["bom.md"].title == "Harbour notes" and documents["bom.md"].text.startswith("# Harbour")
    assert documents["bom.html"].title == "Ferry page" and "\ufeff" not in documents["bom.html"].text


def test_bad_corpus_folder_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="corpus folder not found"):
        load_corpus(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no documents"):
        load_corpus(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(ValueError, match="broken.pdf"):
        load_corpus(tmp_path / "bad")


def test_serves_files_with_their_type(web):
    page = httpx.get(web.url_for("firms/olvane.html"))
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.content == FILES["firms/olvane.html"].encode()
    chinese = httpx.get(web.url_for("zh/qiaocun.md"))
    assert chinese.text == FILES["zh/qiaocun.md"]
    assert web.path_for(web.url_for("zh/qiaocun.md")) == "zh/qiaocun.md"
    assert web.path_for("http://127.0.0.1:1/towns/brackwater.md") == "towns/brackwater.md"  # port-agnostic
    assert web.path_for(web.base_url + "/nothing.md") is None


@pytest.mark.parametrize("path", ["/nothing.md", "/ignored.json", "/../secret.md", "/towns/../../secret.md", "/"])
def test_nothing_outside_the_corpus(web, path):
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=5)
    connection.request("GET", path)  # sent as written: no client-side normalizing
    response = connection.getresponse()
    assert response.status == 404
    assert b"not on the web" not in response.read()
    connection.close()


def test_tavily_client_searches_it(web):
    client = TavilyClient(api_key="any-key", api_base_url=web.base_url)
    answer = client.search("When was the Greyhorn Light first lit?", max_results=3)
    results = answer["results"]
    assert results[0]["url"] == web.url_for("towns/brackwater.md")
    assert results[0]["title"] == "Brackwater"
    assert "1871" in results[0]["content"]
    assert len(results) <= 3
    tern = client.search("Tern-4 tide gauge maker")["results"]
    assert tern[0]["url"] == web.url_for("firms/olvane.html")
    assert web.searches == ["When was the Greyhorn Light first lit?", "Tern-4 tide gauge maker"]


def test_cjk_query_finds_the_chinese_page(web):
    client = TavilyClient(api_key="any-key", api_base_url=web.base_url)
    results = client.search("桥村牡蛎产量")["results"]
    assert results and results[0]["url"] == web.url_for("zh/qiaocun.md")
    assert "四百二十吨" in results[0]["content"]


def test_query_matching_nothing_gives_no_results(web):
    assert web.search("zeppelin quantum", 5)["results"] == []


def test_bad_search_request_is_400(web):
    assert httpx.post(web.base_url + "/search", content=b"not json").status_code == 400
    assert httpx.post(web.base_url + "/search", json={"max_results": 2}).status_code == 400


def test_terms_and_passages():
    assert terms("The Greyhorn Light, 1871") == ["greyhorn", "light", "1871"]
    assert terms("桥村牡蛎") == ["桥村", "村牡", "牡蛎"]
    long_text = "\n\n".join(f"Paragraph {i} " + "word " * 100 for i in range(20))
    chunks = passages(long_text)
    assert len(chunks) > 5 and all(len(c) <= 1000 for c in chunks)
    assert "".join(chunks).replace("\n", "").replace(" ", "") == long_text.replace("\n", "").replace(" ", "")


async def test_crawl_activity_reads_a_page(web, tmp_path):
    blobs = FileBlobStore(tmp_path / "blobs")
    crawler = CrawlActivities(blobs, allow_private=True, timeout=5.0)
    result = await crawler.crawl(CrawlRequest(url=web.url_for("towns/brackwater.md")))
    assert not result.error, result.content
    assert result.sources[0].url == web.url_for("towns/brackwater.md")
    assert "Greyhorn Light" in await blobs.get(result.blob)
    html = await crawler.crawl(CrawlRequest(url=web.url_for("firms/olvane.html")))
    assert not html.error and "Tern-4" in await blobs.get(html.blob)


async def test_the_eval_crawls_its_offline_web_and_nothing_else(web, corpus, tmp_path):
    """The eval lets the crawler reach loopback (its offline web is there) but
    only the offline web's origin: not another loopback service, not the internet."""
    blobs = FileBlobStore(tmp_path / "blobs")
    crawler = CrawlActivities(blobs, allow_private=True, timeout=5.0, only=(web.base_url,))
    assert not (await crawler.crawl(CrawlRequest(url=web.url_for("towns/brackwater.md")))).error
    with CorpusWeb(corpus) as other:  # another service on loopback
        refused = await crawler.crawl(CrawlRequest(url=other.url_for("towns/brackwater.md")))
        assert refused.error and "is not on the web this worker may read" in refused.content
        unlimited = CrawlActivities(blobs, allow_private=True)
        assert not (await unlimited.crawl(CrawlRequest(url=other.url_for("towns/brackwater.md")))).error
    for url in ("https://example.com/", f"https://127.0.0.1:{web.port}/towns/brackwater.md"):
        refused = await crawler.crawl(CrawlRequest(url=url))
        assert refused.error and "is not on the web this worker may read" in refused.content
