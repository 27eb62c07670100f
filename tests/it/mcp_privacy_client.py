"""Asks `memoria mcp` (over stdio, with the official MCP Python SDK) for notes an agent must
never see, and tries to change and forget them.

usage: mcp_privacy_client.py MEMORIA_BIN HOME CWD REQUEST_JSON
REQUEST_JSON: {"queries": [...], "ids": [...], "touch": [...]} (touch: ids to overwrite and forget)
Prints one JSON line: {"search": {query: text}, "expand": {id: text}, "remember": {id: text},
"forget": {id: text}}, where text is everything the server answered, errors included.
"""
import asyncio, json, os, sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BIN, HOME, CWD, REQUEST = sys.argv[1:5]
request = json.loads(REQUEST)
out = {"search": {}, "expand": {}, "remember": {}, "forget": {}}


async def answer(session, tool, args):
    try:
        result = await session.call_tool(tool, args)
        parts = [c.text for c in result.content if getattr(c, "text", None)]
        if result.structuredContent is not None:
            parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
        return "\n".join(parts)
    except Exception as e:  # an error answer is text the agent sees, too
        return f"error: {e}"


async def main():
    env = dict(os.environ, MEMORIA_HOME=HOME)
    params = StdioServerParameters(command=BIN, args=["mcp"], env=env, cwd=CWD)
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for q in request["queries"]:
                out["search"][q] = await answer(s, "memory_search", {"query": q, "limit": 50})
            for i in request["ids"]:
                out["expand"][i] = await answer(s, "memory_expand", {"id": i})
            for i in request["touch"]:
                out["remember"][i] = await answer(s, "remember", {
                    "id": i, "summary": "overwritten by an agent", "body": "overwritten"})
                out["forget"][i] = await answer(s, "forget", {"id": i, "confirm": True})
    print(json.dumps(out, ensure_ascii=False))


asyncio.run(main())
