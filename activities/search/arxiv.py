"""The arXiv API (Atom feed), for scientific papers."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx

from activities.search.base import ARXIV_BASE_URL, ATOM, Hit, HttpEngine, SearchRejected, make_hit, text_of


class ArxivEngine(HttpEngine):
    name = "arxiv"
    key_name = None

    def __init__(self, base_url: str | None = None, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(client)
        self.url = (base_url or ARXIV_BASE_URL).rstrip("/") + "/api/query"

    async def search(self, query: str, max_results: int) -> list[Hit]:
        params = {"search_query": f"all:{query}", "start": 0, "max_results": max_results}
        response = await self._get(self.url, params)
        try:
            root = ET.fromstring(response.content)
        except ET.ParseError as err:
            raise SearchRejected(f"arxiv answered with unreadable XML ({err}).") from err
        hits = []
        for entry in root.iter(f"{ATOM}entry"):
            entry_id = (entry.findtext(f"{ATOM}id") or "").strip()
            summary = text_of(entry.findtext(f"{ATOM}summary"))
            if "/api/errors" in entry_id:  # arXiv reports a bad query as an entry
                raise SearchRejected(f"arxiv rejected the query: {summary or entry_id}")
            url = entry_id
            for link in entry.findall(f"{ATOM}link"):
                if link.get("rel") == "alternate" and link.get("href"):
                    url = link.get("href", "")
                    break
            if url.startswith("http://arxiv.org/"):
                url = "https://" + url.removeprefix("http://")
            authors = [text_of(a.findtext(f"{ATOM}name")) for a in entry.findall(f"{ATOM}author")]
            byline = ", ".join(authors[:5]) + (" et al." if len(authors) > 5 else "")
            published = (entry.findtext(f"{ATOM}published") or "")[:10]
            prefix = " ".join(p for p in (byline, f"({published})" if published else "") if p)
            content = f"{prefix}. {summary}" if prefix else summary
            if hit := make_hit(entry.findtext(f"{ATOM}title"), url, content):
                hits.append(hit)
        return hits[:max_results]
