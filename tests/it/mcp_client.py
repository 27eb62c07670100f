"""Drives `memoria mcp` with the official MCP Python SDK, as a real agent host would. Runs
under SDK 1.x and 2.x alike (2.x renamed McpError and uses snake_case attributes).

usage: mcp_client.py MEMORIA_BIN HOME PROJECT_A PROJECT_B
Prints one JSON line of facts the Rust test checks; exits non-zero on any failed expectation.
"""
import asyncio, json, os, sys
from importlib.metadata import version

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:
    from mcp.shared.exceptions import MCPError
except ImportError:
    from mcp.shared.exceptions import McpError as MCPError

BIN, HOME, PROJ_A, PROJ_B = sys.argv[1:5]
facts = {"sdk": version("mcp")}


def attr(obj, snake, camel):
    """An attribute under its 2.x (snake_case) or 1.x (camelCase) name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def structured(result):
    return attr(result, "structured_content", "structuredContent")


def params(cwd):
    env = dict(os.environ, MEMORIA_HOME=HOME)
    return StdioServerParameters(command=BIN, args=["mcp"], env=env, cwd=cwd)


async def expect_rpc_error(session, tool, args, needle):
    """A JSON-RPC error: the SDK raises it."""
    try:
        result = await session.call_tool(tool, args)
    except MCPError as e:
        assert needle.lower() in str(e).lower(), f"{tool}: error {e!r} lacks {needle!r}"
        return str(e)
    raise AssertionError(f"{tool}{args} should fail, got {result}")


async def expect_tool_error(session, tool, args, code, needle):
    """A failed call the model reads: a result with isError, the message as text and
    {code, message, detail} as structured content. Never an exception."""
    try:
        result = await session.call_tool(tool, args)
    except MCPError as e:
        raise AssertionError(f"{tool}{args} raised {e!r}; it must be a tool result with isError")
    assert attr(result, "is_error", "isError"), f"{tool}{args} should fail, got {result}"
    body = structured(result)
    assert body["code"] == code, f"{tool}{args}: code {body['code']!r}, not {code!r}: {body}"
    text = result.content[0].text
    assert text == body["message"], f"{tool}: text {text!r} is not the message {body}"
    assert needle.lower() in text.lower(), f"{tool}: {text!r} lacks {needle!r}"
    return body


async def session_a():
    async with stdio_client(params(PROJ_A)) as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            facts["server"] = attr(init, "server_info", "serverInfo").name
            facts["instructions_name_project"] = PROJ_A in (init.instructions or "")
            tools = {t.name: t for t in (await s.list_tools()).tools}
            facts["tools"] = sorted(tools)
            schema = attr(tools["memory_search"], "input_schema", "inputSchema")
            facts["search_schema_has_query"] = "query" in schema["properties"]

            res = await s.call_tool("remember", {
                "summary": "Deploys go out on Tuesdays",
                "body": "Never on Fridays. See [[release-train]].",
                "type": "feedback", "tags": ["ops"], "source": "user_confirmed",
            })
            assert not attr(res, "is_error", "isError"), res
            rem = structured(res)
            facts["remember_id"] = rem["id"]
            facts["missing_links"] = rem["missingLinks"]
            await s.call_tool("remember", {"summary": "Prefers tea over coffee", "body": "green tea", "type": "user"})

            hits = structured(await s.call_tool("memory_search", {"query": "when do deploys go out"}))["results"]
            facts["search_top"] = hits[0]["id"]
            facts["search_trust"] = hits[0]["trust"]
            multi = structured(await s.call_tool("memory_search", {"query": ["tea", "coffee"], "types": ["user"]}))["results"]
            facts["multi_top_summary"] = multi[0]["summary"]

            exp = structured(await s.call_tool("memory_expand", {"id": rem["id"]}))
            facts["expand_body"] = exp["body"]
            facts["expand_tags"] = exp["frontmatter"]["tags"]

            # An unknown tool is a JSON-RPC error; every failure the agent can act on is a tool
            # result it reads. The session keeps serving.
            facts["rpc_errors"] = [await expect_rpc_error(s, "no_such_tool", {}, "tool")]
            facts["tool_errors"] = [
                await expect_tool_error(s, "memory_search", {"query": 42}, "invalid_input", "query"),
                await expect_tool_error(s, "memory_search", {"query": "x", "limit": "ten"}, "invalid_input", "invalid"),
                await expect_tool_error(s, "memory_search", {"query": "x", "created_after": "soon"}, "invalid_input", "date"),
                await expect_tool_error(s, "remember", {"summary": "k", "body": "AKIAIOSFODNN7EXAMPLE"}, "credential_refused", "secret"),
                await expect_tool_error(s, "remember", {"summary": "big", "body": "x" * 200_000}, "too_large", "128 KiB"),
                await expect_tool_error(s, "remember", {"summary": "t", "body": "b", "type": "nonsense"}, "invalid_input", "type"),
                await expect_tool_error(s, "memory_search", {"query": "q" * 10_000}, "too_large", "limit"),
                await expect_tool_error(s, "forget", {"id": rem["id"], "confirm": False}, "confirmation_required", "confirm"),
                await expect_tool_error(s, "memory_expand", {"id": "../../etc/passwd"}, "invalid_id", "invalid"),
                await expect_tool_error(s, "memory_expand", {"id": "no-such-note"}, "not_found", "not found"),
            ]
            still = structured(await s.call_tool("memory_search", {"query": "tuesdays"}))["results"]
            facts["serving_after_errors"] = still[0]["id"] == rem["id"]

            # What was said, for a host without hooks: logged, then found with who and when.
            said = [
                {"role": "user", "text": "The quarterly pricing review is with Carla on the ninth", "time": "2025-03-01T09:00:00Z"},
                {"role": "assistant", "text": "Noted: Carla, the ninth.", "time": "2025-03-01T09:00:05Z"},
                {"role": "other", "speaker": "Bruno", "text": "ok", "time": "2025-03-01T09:01:00Z"},
            ]
            logged = structured(await s.call_tool("memory_log", {"conversation": "chat-1", "messages": said}))
            again = structured(await s.call_tool("memory_log", {"conversation": "chat-1", "messages": said}))
            facts["log_added"] = [logged["added"], again["added"], again["already"]]
            facts["log_scope"] = logged["scope"]
            found = structured(await s.call_tool("memory_search", {"query": "who runs the pricing review"}))["results"]
            msg = [h for h in found if h.get("said")]
            facts["log_hit"] = {"said": msg[0]["said"], "snippet": msg[0]["snippet"], "trust": msg[0]["trust"]} if msg else None
            if msg:
                opened = structured(await s.call_tool("memory_expand", {"id": msg[0]["id"]}))
                facts["log_around"] = [m["text"] for m in opened["around"]]
            # Working memory: kept at hand, found beside notes, a credential refused.
            kept = structured(await s.call_tool("memory_working", {"text": "Halfway through the billing migration: tables done, the cron job next", "ttl_hours": 2}))
            found = structured(await s.call_tool("memory_search", {"query": "billing migration cron job"}))["results"]
            hit = [h for h in found if h["id"] == kept["key"]]
            facts["working_hit"] = {"type": hit[0].get("type"), "trust": hit[0]["trust"]} if hit else None
            facts["working_errors"] = [
                await expect_tool_error(s, "memory_working", {"text": "password: hunter2-zz-99"}, "credential_refused", "secret"),
            ]
            facts["log_errors"] = [
                await expect_tool_error(s, "memory_log", {"conversation": "c", "messages": []}, "invalid_input", "messages"),
                await expect_tool_error(s, "memory_log", {"conversation": "c", "messages": [{"role": "user", "text": "x", "time": "soon"}]}, "invalid_input", "date"),
            ]


async def session_b():
    async with stdio_client(params(PROJ_B)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            hits = structured(await s.call_tool("memory_search", {"query": "deploys tuesdays fridays"}))["results"]
            # Vector search returns neighbours of any query; none may come from project A.
            facts["b_sees_a"] = [h["id"] for h in hits if h["id"].startswith("vt:project/")]
            user = structured(await s.call_tool("memory_search", {"query": "tea"}))["results"]
            facts["b_sees_user_note"] = user[0]["summary"] == "Prefers tea over coffee"
            facts["b_expand_a"] = await expect_tool_error(s, "memory_expand", {"id": facts["remember_id"]}, "not_found", "not found")
            # Project A's conversations stay in project A.
            said = structured(await s.call_tool("memory_search", {"query": "quarterly pricing review Carla ninth"}))["results"]
            facts["b_sees_a_said"] = [h["id"] for h in said if h.get("said")]


async def session_a_forget():
    async with stdio_client(params(PROJ_A)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("forget", {"id": facts["remember_id"], "confirm": True})
            facts["forget_backup"] = structured(res)["backupId"]
            hits = structured(await s.call_tool("memory_search", {"query": "tuesdays"}))["results"]
            facts["after_forget"] = len([h for h in hits if h["id"] == facts["remember_id"]])


async def main():
    await session_a()
    await session_b()
    await session_a_forget()
    print(json.dumps(facts))


asyncio.run(main())
