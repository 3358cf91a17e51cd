"""The built wheel, not this checkout: built with pip, installed with its dependencies from PyPI into a clean
virtual environment (``python3.11 -m venv``), then used as a user who is not in the repository would:
``memroute init``, ``memroute demo``, and ``memroute serve --demo`` with its console and API docs pages.

This is the one test that needs PyPI (the dependencies); pip's cache makes a second run take about a minute.
Nothing of this checkout is on the installed environment's path (``PYTHONPATH`` is cleared).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _python311() -> str:
    found = shutil.which("python3.11")
    return found or getattr(sys, "_base_executable", sys.executable)


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (f"{' '.join(argv)} exited {done.returncode}:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def test_the_built_wheel_works_in_a_clean_environment(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMROUTE_", "PYTHON", "VIRTUAL_ENV"))}
    home = tmp_path / "home"
    home.mkdir()
    env["HOME"] = str(home)
    dist = tmp_path / "dist"
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info next to the sources
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "test-artifacts", "__pycache__", ".*_cache"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)], tmp_path, env, 600)
    wheels = list(dist.glob("memroute-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp_path / "venv"
    _run([_python311(), "-m", "venv", str(venv)], tmp_path, env, 300)
    _run([str(venv / "bin" / "pip"), "install", "-q", f"{wheels[0]}[server]"], tmp_path, env, 900)
    memroute = str(venv / "bin" / "memroute")
    where = _run([str(venv / "bin" / "python"), "-c", "import memroute; print(memroute.__file__)"], tmp_path, env, 60)
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's copy, not this checkout's

    work = tmp_path / "work"
    work.mkdir()
    init = _run([memroute, "init"], work, env, 120)
    assert (work / "agents.toml").is_file() and "next:" in init.stdout
    demo = _run([memroute, "demo", "--store", "sqlite:///demo.db"], work, env, 600)
    assert "[EPISODE_EVIDENCE]" in demo.stdout and "Try it yourself" in demo.stdout

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "serve.txt").open("w")
    server = subprocess.Popen([memroute, "serve", "--demo", "--store", "sqlite:///serve.db", "--port", str(port)],
                              cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, (tmp_path / "serve.txt").read_text()
            with suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the installed service did not answer in 180 s"
            time.sleep(0.5)
        console = httpx.get(f"{url}/", follow_redirects=True, timeout=10)
        assert console.status_code == 200 and "memroute" in console.text and "<script" in console.text
        docs = httpx.get(f"{url}/docs", follow_redirects=True, timeout=10)
        assert docs.status_code == 200 and '<script src="/docs/swagger-ui-bundle.js">' in docs.text
        bundle = httpx.get(f"{url}/docs/swagger-ui-bundle.js", timeout=30)
        assert bundle.status_code == 200 and "SwaggerUIBundle" in bundle.text
        assert httpx.get(f"{url}/openapi.json", timeout=10).json()["info"]["title"] == "memroute"
        recall = httpx.post(f"{url}/v1/recall", timeout=60, params={"owner": "demo"},
                            json={"text": "先週のあれどうなった？", "session": "ja-work"})
        assert recall.status_code == 200 and "プロジェクトX" in recall.json()["memory_pack"], recall.text
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
        log.close()
