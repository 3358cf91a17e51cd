"""Every code block of README.md, run as written, in order, from an empty folder, with the installed CLI.

How each block is run is in :mod:`tests.readme_blocks`. The only changes made to a block before it runs:
the service's port 8765 becomes a free port (``MEMROUTE_PORT``, ``--port``, ``127.0.0.1:8765``), and in the
MCP client configuration ``/home/me`` becomes the test's home folder and the ``command`` the installed
``memroute``. ``HOME`` is a fresh folder, ``MEMROUTE_*`` variables are cleared, and nothing is reached over
the network. After a block, the check named by a piece of its text (``CHECKS``) tests what its comments
promise; a check whose text no block has any more fails the test, so checks cannot go stale silently.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.readme_blocks import README, Block, read_blocks

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
MEMROUTE = BIN / "memroute"
DRIVER = r"""
import json, sys, traceback
ns = {"__name__": "__main__"}
for line in sys.stdin:
    request = json.loads(line)
    try:
        exec(compile(request["code"], request["name"], "exec"), ns)
        answer = {"ok": True}
    except BaseException:
        answer = {"ok": False, "error": traceback.format_exc()}
    sys.stdout.flush()
    sys.stdout.write("\n@@readme-test@@ " + json.dumps(answer) + "\n")
    sys.stdout.flush()
"""

# Python run after a block (in the same interpreter) or shell run after it (same folder and environment).
# Keys are a piece of the block's text.
CHECKS: dict[str, str] = {
    # Python API: the search before update / forget finds the session's Korean memory
    'hits = mem.search("예산 회의"': "assert len(hits) == 1 and hits[0].memory.session_id == 's1', hits",
    # Recall: the Project X memory it stored, injected, in a non-empty pack
    'r = mem.recall("先週のあれどうなった？"': (
        "assert r.should_inject, r.trace.notes\n"
        "assert any('プロジェクトX' in m.memory.text and m.relevance == 'high' for m in r.memories), r.memories\n"
        "pack = r.memory_pack(max_chars=1500)\n"
        "assert pack.startswith('[EPISODE_EVIDENCE]') and 'プロジェクトXは進捗が遅れている' in pack, pack\n"
        "assert r.trace.strategy and r.trace.queries\n"),
    # Route: the commented answers
    'agents = load_catalogue("agents.toml")': (
        "assert out.agent.id == 'translator' and not out.no_route and out.confidence > 0.5, out\n"
        "assert out.scores and out.scores[0].strategies\n"
        "assert router.route('hi', agents).no_route\n"
        "got = [(str(d.action), d.agent.id) for d in decisions]\n"
        "assert got == [('routed', 'translator'), ('stayed', 'translator'), ('switched', 'calendar')], got\n"),
    # Query understanding
    "from memroute.analysis import analyze": (
        "assert (str(a.continuation.kind), a.continuation.cue) == ('follow_up', 'じゃあ')\n"
        "assert a.needs_context and any(str(x.type) == 'ellipsis' and x.surface == 'じゃあ' for x in a.references)\n"
        "tr = analyze('先週のあれどうなった？', now='2026-11-20T10:00:00+09:00').time_range\n"
        "assert tr.start.isoformat().startswith('2026-11-09T00:00') and tr.end.isoformat().startswith('2026-11-16')\n"
        "assert len(analyze(\"what's the status and who owns it?\").parts) == 2\n"),
    # Quick start in an empty folder: the starter files exist and are the ones the examples use
    "memroute init": "test -f agents.toml && test -f memroute.toml && grep -q threshold agents.toml",
    # the LLM variables are the settings' names
    "export MEMROUTE_LLM_URL": (
        '"$PY" -c "from memroute.config import Settings; s = Settings.load(); '
        "assert (s.llm_url, s.llm_model) == ('http://localhost:11434/v1', 'qwen2.5:7b-instruct'), s\""),
    # the Python client against the running service
    "with Client(": (
        "assert hits and 'プロジェクトX' in hits[0].memory.text, hits\n"
        "assert 'プロジェクトXは進捗が遅れている' in r['memory_pack'], r\n"
        "assert d['action'] in ('routed', 'no_route') and 'scores' in d, d\n"
        "import asyncio\nasyncio.run(remember_async())\n"),
    # settings file: commands in the folder use it
    'store = "sqlite:///data/memroute.db"': (
        '"$MEMROUTE" remember "a memory for the settings file" >/dev/null && '
        '"$MEMROUTE" stats --json | "$PY" -c "import json, sys; d = json.load(sys.stdin); '
        "assert d['store'].endswith('data/memroute.db') and d['memories'] >= 1, d\""),
}


def _is_python(check: str) -> bool:
    """Shell checks call ``"$PY"``, ``"$MEMROUTE"``, ``test`` or ``grep``; the others are Python."""
    return not re.match(r'("\$|test |grep )', check)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Python:
    """One interpreter for the README's Python blocks, so later blocks see earlier blocks' names."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self._err = log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-u", "-c", DRIVER], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err)

    def run(self, code: str, name: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"code": code, "name": name}) + "\n")
        self.proc.stdin.flush()
        out: list[str] = []
        for line in self.proc.stdout:
            if line.startswith("@@readme-test@@ "):
                answer = json.loads(line.split(" ", 1)[1])
                if not answer["ok"]:
                    raise AssertionError(f"{name} failed:\n{answer['error']}\noutput:\n{''.join(out)}")
                return "".join(out)
            out.append(line)
        raise AssertionError(f"{name}: the interpreter ended; stderr in {self._err.name}")

    def close(self) -> None:
        with suppress(Exception):
            assert self.proc.stdin
            self.proc.stdin.close()
            self.proc.wait(30)
        self.proc.kill()
        self._err.close()


class Readme:
    """The state of one run through the README: its folder, environment, interpreter and servers."""

    def __init__(self, tmp: Path) -> None:
        self.work = tmp / "work"
        self.home = tmp / "home"
        self.work.mkdir()
        self.home.mkdir()
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMROUTE_")}
        env.update(HOME=str(self.home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PY=sys.executable,
                   MEMROUTE=str(MEMROUTE), NO_PROXY="*")
        env.pop("XDG_DATA_HOME", None)
        self.env = env
        self.python = Python(self.work, env, tmp / "python-stderr.txt")
        self.servers: list[subprocess.Popen[str]] = []
        self.server_env: dict[str, str] = {}
        self.handled: list[tuple[Block, str]] = []
        self.checked: set[str] = set()

    def local(self, text: str) -> str:
        return text.replace("127.0.0.1:8765", f"127.0.0.1:{self.port}").replace("--port 8765", f"--port {self.port}")

    def sh(self, script: str, where: str, timeout: float = 300) -> str:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=self.env, text=True,
                              capture_output=True, timeout=timeout)
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def check_for(self, block: Block) -> str | None:
        found = [key for key in CHECKS if key in block.text and (block.lang == "python") == _is_python(CHECKS[key])]
        assert len(found) <= 1, f"{block.where}: several checks match: {found}"
        if found:
            self.checked.add(found[0])
            return CHECKS[found[0]]
        return None

    # ------------------------------------------------------------------------------------------ blocks

    def run(self, block: Block) -> None:
        marker = block.marker or ""
        if marker.startswith("skip:"):
            reason = marker[len("skip:"):].strip()
            assert len(reason) > 20, f"{block.where}: a skipped block says where it is covered instead"
            self.handled.append((block, f"skipped: {reason}"))
            return
        handler = {"python": self.run_python, "sh": self.run_sh, "json": self.run_json, "toml": self.run_toml}.get(
            block.lang)
        assert handler is not None, f"{block.where}: no way to run a {block.lang!r} block; mark it"
        handler(block)

    def run_python(self, block: Block) -> None:
        if block.marker == "needs-server":
            assert self.servers and self.servers[-1].poll() is None, f"{block.where}: no server is running"
        else:
            assert block.marker is None, f"{block.where}: unknown marker {block.marker!r}"
        self.python.run(self.local(block.text), block.where)
        check = self.check_for(block)
        if check:
            self.python.run(check, f"check of {block.where}")
        self.handled.append((block, "python"))

    def run_sh(self, block: Block) -> None:
        if block.marker == "server":
            self.start_server(block)
            return
        assert block.marker is None, f"{block.where}: unknown marker {block.marker!r}"
        check = self.check_for(block)  # in the same shell: it sees what the block exported
        self.sh(self.local(block.text) + (f"\n{check}\n" if check else ""), block.where)
        self.handled.append((block, "sh"))

    def start_server(self, block: Block) -> None:
        """Run the block in the background; every command before the last runs first, and its output is
        kept (a key it prints); the server must answer /healthz within a minute."""
        self.stop_servers()
        lines = [line for line in block.text.splitlines() if line.strip()]
        setup, serve = lines[:-1], lines[-1]
        assert "memroute serve" in serve, f"{block.where}: a server block ends with `memroute serve`"
        printed = self.sh("\n".join(setup), block.where) if setup else ""
        env = dict(self.env, MEMROUTE_PORT=str(self.port))
        log = (self.work.parent / f"server-{block.line}.txt").open("w")
        proc = subprocess.Popen(["bash", "-c", self.local(serve)], cwd=self.work, env=env, text=True,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.servers.append(proc)
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"{block.where}: the server exited:\n{Path(log.name).read_text()}"
            with suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"{block.where}: no answer on {url}/healthz in 120 s"
            time.sleep(0.5)
        console = httpx.get(f"{url}/", timeout=10, follow_redirects=True)
        assert console.status_code == 200 and "/console/" in str(console.url), console.url
        docs = httpx.get(f"{url}/docs", timeout=10, follow_redirects=True)  # Swagger UI from this server only
        assert docs.status_code == 200 and '<script src="/docs/swagger-ui-bundle.js">' in docs.text, docs.text
        assert httpx.get(f"{url}/docs/swagger-ui-bundle.js", timeout=10).status_code == 200
        keys = re.findall(r"\bmr_[A-Za-z0-9_-]{20,}", printed)
        if keys:  # a service with keys: refused without one, answered with the printed one
            assert httpx.get(f"{url}/v1/memories", timeout=10).status_code == 401
            ok = httpx.get(f"{url}/v1/memories", headers={"Authorization": f"Bearer {keys[0]}"}, timeout=30)
            assert ok.status_code == 200, ok.text
        self.handled.append((block, "server"))

    def stop_servers(self) -> None:
        for proc in self.servers:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
        self.servers.clear()

    def run_json(self, block: Block) -> None:
        config = json.loads(block.text)
        assert "mcpServers" in config, f"{block.where}: a JSON block is an MCP client configuration"
        for name, server in config["mcpServers"].items():
            asyncio.run(self.connect_mcp(name, server))
        self.handled.append((block, "mcp"))

    async def connect_mcp(self, name: str, server: dict[str, Any]) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        import memroute

        command = server["command"]
        assert Path(command).name == "memroute", command
        home = str(self.home)
        args = [a.replace("/home/me", home) for a in server["args"]]
        # what the user has at those paths: the starter catalogue and a repository
        for i, a in enumerate(args[:-1]):
            if a == "--agents":
                Path(args[i + 1]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(self.work / "agents.toml", args[i + 1])
            if a == "--repo":
                Path(args[i + 1]).mkdir(parents=True, exist_ok=True)
                (Path(args[i + 1]) / "login.py").write_text("class LoginService:\n    pass\n")
        params = StdioServerParameters(command=str(MEMROUTE), args=args, env=self.env, cwd=str(self.home))
        # the server's stderr to a real file: stdio_client's default is the sys.stderr of the moment its module was
        # imported, which is pytest's capture object (no file descriptor) when another test imported it first
        with (self.home / "mcp-server.err").open("w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.version == memroute.__version__, init.server_info
                tools = {t.name for t in (await session.list_tools()).tools}
                assert {"remember", "recall", "route", "analyze", "forget", "find_definitions"} <= tools, tools
                stored = await session.call_tool("remember", {"text": "The shop's login page moved to /signin"})
                assert not stored.is_error, stored
                recalled = await session.call_tool("recall", {"text": "where is the login page?"})
                assert not recalled.is_error and "/signin" in json.dumps(recalled.structured_content or
                                                                        [c.model_dump() for c in recalled.content])
                routed = await session.call_tool("route", {"text": "Translate this to Korean"})
                assert "translator" in json.dumps([c.model_dump() for c in routed.content]), routed
                bad = await session.call_tool("recall", {"text": 5})  # a clean argument error, not a validation dump
                assert bad.is_error and bad.content[0].text == "InputError: recall: text: Input should be a valid " \
                    "string (got 5)", bad
        store = next(a for a in args if a.startswith("sqlite:"))
        assert Path(store[len("sqlite:///"):]).is_file(), f"{name}: the store is not where the config says"

    def run_toml(self, block: Block) -> None:
        first = block.text.splitlines()[0]
        m = re.fullmatch(r"#\s*(\S+\.toml)\s*", first)
        assert m, f"{block.where}: a TOML block starts with a comment naming its file"
        (self.work / m.group(1)).write_text(block.text, encoding="utf-8")
        check = self.check_for(block)
        assert check, f"{block.where}: a TOML block needs a check that commands read it"
        self.sh(check, f"check of {block.where}")
        self.handled.append((block, "toml"))

    def close(self) -> None:
        self.stop_servers()
        self.python.close()


@pytest.fixture
def readme(tmp_path: Path) -> Iterator[Readme]:
    r = Readme(tmp_path)
    try:
        yield r
    finally:
        r.close()


def test_every_readme_block_runs_as_written(readme: Readme) -> None:
    blocks = read_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 10
    for block in blocks:
        readme.run(block)
    assert [b for b, _ in readme.handled] == blocks  # every block run or skipped with a reason, none silently
    assert readme.checked == set(CHECKS), f"checks that match no block: {set(CHECKS) - readme.checked}"
    # nothing written outside the folders the README names (the default store is under HOME)
    assert not (readme.work / "home").exists()


def test_markers_and_fences_are_read() -> None:
    text = ("intro\n<!-- readme-test: skip: shown only, covered by test_x -->\n\n```sh\nmake run\n```\n"
            "```python\nx = 1\n```\n```\nplain\n```\n")
    blocks = read_blocks(text)
    assert [(b.lang, b.marker, b.line) for b in blocks] == [("sh", "skip: shown only, covered by test_x", 4),
                                                            ("python", None, 7), ("text", None, 10)]
    assert blocks[1].text == "x = 1\n"
    with pytest.raises(ValueError, match="never closed"):
        read_blocks("```python\nx = 1\n")


def test_the_evaluate_page_commands_are_real_commands() -> None:
    """docs/evaluate.md's scoring commands name real commands and options (the data are not needed to check
    that; the figures themselves are in docs/benchmarks.md with their dates)."""
    import shlex

    from memroute.cli import build_parser

    page = README.parent / "docs" / "evaluate.md"
    commands = [line for block in read_blocks(page.read_text(encoding="utf-8")) if block.lang == "sh"
                for line in block.text.splitlines() if line.startswith("memroute ")]
    assert len(commands) >= 8
    parser = build_parser()
    for line in commands:
        argv = shlex.split(line.replace("$D", "/data"))[1:]
        args, extra = parser.parse_known_args(argv)
        assert not extra and callable(args.handler), line
