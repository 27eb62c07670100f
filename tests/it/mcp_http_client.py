"""Connects to `memoria mcp --http` with the official MCP Python SDK's streamable HTTP client.

usage: mcp_http_client.py URL TOKEN
"""
import asyncio, json, sys, urllib.error, urllib.request

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

URL, TOKEN = sys.argv[1:3]
facts = {}


def status_without_token(headers=None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    req = urllib.request.Request(URL, data=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **(headers or {})})
    try:
        urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as e:
        return e.code
    return 200


async def main():
    facts["without_token"] = status_without_token()
    # A web page of another origin is refused even with the right token (DNS rebinding).
    facts["foreign_origin"] = status_without_token(
        {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"})
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with streamablehttp_client(URL, headers=headers) as (r, w, _):
        async with ClientSession(r, w) as s:
            await s.initialize()
            facts["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
            res = await s.call_tool("remember", {"summary": "Over HTTP", "body": "streamable", "type": "user"})
            facts["remembered"] = res.structuredContent["id"]
            hits = (await s.call_tool("memory_search", {"query": "streamable"})).structuredContent["results"]
            facts["found"] = [h["id"] for h in hits][:1]
    print(json.dumps(facts))


asyncio.run(main())
