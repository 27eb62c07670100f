"""Drives `memoria mcp` with the official MCP Python SDK, as a real agent host would.

usage: mcp_client.py MEMORIA_BIN HOME PROJECT_A PROJECT_B
Prints one JSON line of facts the Rust test checks; exits non-zero on any failed expectation.
"""
import asyncio, json, os, sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

BIN, HOME, PROJ_A, PROJ_B = sys.argv[1:5]
facts = {}


def params(cwd):
    env = dict(os.environ, MEMORIA_HOME=HOME)
    return StdioServerParameters(command=BIN, args=["mcp"], env=env, cwd=cwd)


async def expect_error(session, tool, args, needle):
    try:
        result = await session.call_tool(tool, args)
    except McpError as e:
        assert needle.lower() in str(e).lower(), f"{tool}: error {e!r} lacks {needle!r}"
        return str(e)
    raise AssertionError(f"{tool}{args} should fail, got {result}")


async def session_a():
    async with stdio_client(params(PROJ_A)) as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            facts["server"] = init.serverInfo.name
            facts["instructions_name_project"] = PROJ_A in (init.instructions or "")
            tools = {t.name: t for t in (await s.list_tools()).tools}
            facts["tools"] = sorted(tools)
            facts["search_schema_has_query"] = "query" in tools["memory_search"].inputSchema["properties"]

            res = await s.call_tool("remember", {
                "summary": "Deploys go out on Tuesdays",
                "body": "Never on Fridays. See [[release-train]].",
                "type": "feedback", "tags": ["ops"], "source": "user_confirmed",
            })
            assert not res.isError, res
            rem = res.structuredContent
            facts["remember_id"] = rem["id"]
            facts["missing_links"] = rem["missingLinks"]
            await s.call_tool("remember", {"summary": "Prefers tea over coffee", "body": "green tea", "type": "user"})

            hits = (await s.call_tool("memory_search", {"query": "when do deploys go out"})).structuredContent["results"]
            facts["search_top"] = hits[0]["id"]
            facts["search_trust"] = hits[0]["trust"]
            multi = (await s.call_tool("memory_search", {"query": ["tea", "coffee"], "types": ["user"]})).structuredContent["results"]
            facts["multi_top_summary"] = multi[0]["summary"]

            exp = (await s.call_tool("memory_expand", {"id": rem["id"]})).structuredContent
            facts["expand_body"] = exp["body"]
            facts["expand_tags"] = exp["frontmatter"]["tags"]

            # Bad input: each is a JSON-RPC error and the session keeps serving.
            facts["errors"] = [
                await expect_error(s, "no_such_tool", {}, "tool"),
                await expect_error(s, "memory_search", {"query": 42}, "query"),
                await expect_error(s, "memory_search", {"query": "x", "limit": "ten"}, "invalid"),
                await expect_error(s, "remember", {"summary": "k", "body": "AKIAIOSFODNN7EXAMPLE"}, "secret"),
                await expect_error(s, "remember", {"summary": "big", "body": "x" * 200_000}, "128 KiB"),
                await expect_error(s, "memory_search", {"query": "q" * 10_000}, "limit"),
                await expect_error(s, "forget", {"id": rem["id"], "confirm": False}, "confirm"),
                await expect_error(s, "memory_expand", {"id": "../../etc/passwd"}, "invalid"),
            ]
            still = (await s.call_tool("memory_search", {"query": "tuesdays"})).structuredContent["results"]
            facts["serving_after_errors"] = still[0]["id"] == rem["id"]


async def session_b():
    async with stdio_client(params(PROJ_B)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            hits = (await s.call_tool("memory_search", {"query": "deploys tuesdays fridays"})).structuredContent["results"]
            # Vector search returns neighbours of any query; none may come from project A.
            facts["b_sees_a"] = [h["id"] for h in hits if h["id"].startswith("vt:project/")]
            user = (await s.call_tool("memory_search", {"query": "tea"})).structuredContent["results"]
            facts["b_sees_user_note"] = user[0]["summary"] == "Prefers tea over coffee"
            facts["b_expand_a"] = await expect_error(s, "memory_expand", {"id": facts["remember_id"]}, "not found")


async def session_a_forget():
    async with stdio_client(params(PROJ_A)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("forget", {"id": facts["remember_id"], "confirm": True})
            facts["forget_backup"] = res.structuredContent["backupId"]
            hits = (await s.call_tool("memory_search", {"query": "tuesdays"})).structuredContent["results"]
            facts["after_forget"] = len([h for h in hits if h["id"] == facts["remember_id"]])


async def main():
    await session_a()
    await session_b()
    await session_a_forget()
    print(json.dumps(facts))


asyncio.run(main())
