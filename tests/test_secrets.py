"""Secrets stay off disk: one set of rules (``procflow._secrets``) masks traces and stored
errors, request context entries are stored only when marked, and the probe of issue 12
(the secret shapes below, stored through a real SQLite file) finds nothing on disk."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from procflow import RequestContext, create_step, create_workflow
from procflow._secrets import MASK, is_secret_key, mask_secrets, mask_text
from procflow.processors import PIIDetector
from procflow.storage import SQLiteStorage


class Shape(NamedTuple):
    id: str
    value: Any
    secret: str


_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsImlhdCI6MTcxNDU2NjYwMH0"
        ".Qm9iU2lnbmF0dXJlWHl6MTIzNDU2Nzg5MGFiY2Rl")
_PEM_BODY = "MIIEowIBAAKCAQEAx9Lb3kq8Vd0Xc5Tq7Y2wRzPnM4hK1sJfGgUeA6oBi3rNvQlW8tCy"

SHAPES: tuple[Shape, ...] = (
    Shape("auth-key", {"auth": "Basic YWxpY2U6czNjcjN0LXB3"}, "YWxpY2U6czNjcjN0LXB3"),
    Shape("pwd-key", {"login": {"user": "alice", "pwd": "hunter2-Xq9"}}, "hunter2-Xq9"),
    Shape("passphrase-key", {"passphrase": "correct horse battery staple"},
          "correct horse battery staple"),
    Shape("cookie-key", {"Cookie": "session=f3a9c1d7e2b84a60"}, "f3a9c1d7e2b84a60"),
    Shape("api-keys-list", {"api_keys": ["key-one-7f3k2j", "key-two-9q8w7e"]},
          "key-two-9q8w7e"),
    Shape("database-url", {"dsn": "postgresql://app:Pg-s3cret-pw@db.internal:5432/app"},
          "Pg-s3cret-pw"),
    Shape("aws-secret-key", "aws secret key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8mR2kLp1",
          "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8mR2kLp1"),
    Shape("jwt", f"the session is {_JWT}", _JWT),
    Shape("github-pat", {"note": "CI uses github_pat_11AB2CDEF0gHiJkLmNoPqR_sTuVwXyZ0123456789"
                                 "abcdefghijklmnopqrstuvwxyzABCDE"},
          "github_pat_11AB2CDEF0gHiJkLmNoPqR_sTuVwXyZ0123456789abcdefghijklmnopqrstuvwxyzABCDE"),
    Shape("stripe-restricted", "rk_live_51HxYzAbCdEfGhIjKlMn0p", "rk_live_51HxYzAbCdEfGhIjKlMn0p"),
    Shape("huggingface", ["model pulled with hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"],
          "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    Shape("hex-32-key", "api key 9f86d081884c7d659a2feaa0c55ad015 expired",
          "9f86d081884c7d659a2feaa0c55ad015"),
    Shape("token-in-message", "login failed with token tok_8Hq2Lz9XwP4mRv7Ns1Kd",
          "tok_8Hq2Lz9XwP4mRv7Ns1Kd"),
    Shape("openai-project", "sk-proj-AbCdEf0123456789GhIjKlMnOpQr",
          "sk-proj-AbCdEf0123456789GhIjKlMnOpQr"),
    Shape("aws-access-key-id", {"id": "AKIAZ7Q3N5X2LP9W4RTM"}, "AKIAZ7Q3N5X2LP9W4RTM"),
    Shape("github-classic", "ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HhGgFfEeDdCc",
          "ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HhGgFfEeDdCc"),
    Shape("bearer-header", {"headers": {"Authorization": "Bearer Zk3q9Lm2Xw8Rt5Yp1Nv7"}},
          "Zk3q9Lm2Xw8Rt5Yp1Nv7"),
    Shape("password-key", {"password": "S3cure!Passw0rd"}, "S3cure!Passw0rd"),
    # more than the probe tried
    Shape("slack", "xoxb-230690932595-3394236345889-K6ZvXeIiCOpDaUgYnnWZaH2L",
          "xoxb-230690932595-3394236345889-K6ZvXeIiCOpDaUgYnnWZaH2L"),
    Shape("google", "maps key AIzaSyB3k9Lm2Xw8Rt5Yp1Nv7Qz4Hc6Jd0Fe2Gb",
          "AIzaSyB3k9Lm2Xw8Rt5Yp1Nv7Qz4Hc6Jd0Fe2Gb"),
    Shape("stripe-secret", {"charge_with": "sk_live_ox5VAaTZssHYwswgYUnvNsrr"},
          "sk_live_ox5VAaTZssHYwswgYUnvNsrr"),
    Shape("openai-live", "sk-live-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1", "sk-live-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1"),
    Shape("pem", f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
          _PEM_BODY),
    Shape("header-line", "GET / HTTP/1.1\nCookie: sid=Qk29dLq0x8Zr\n", "sid=Qk29dLq0x8Zr"),
    Shape("named-hex", {"client_secret": "31b9c3978b1e9abd23fa803b9410d5bb"},
          "31b9c3978b1e9abd23fa803b9410d5bb"),
    # issue 42: AWS's documented example keys are secret shapes too, bare or keyworded
    Shape("aws-example-secret-bare", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
          "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    Shape("aws-example-secret-keyworded", "aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
          "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    Shape("aws-example-key-id", {"note": "AKIAIOSFODNN7EXAMPLE"}, "AKIAIOSFODNN7EXAMPLE"),
    Shape("bare-hex-32", "curl -H x:y then 5f4dcc3b5aa765d61d8327deb882cf99 to log in",
          "5f4dcc3b5aa765d61d8327deb882cf99"),
    Shape("example-key-assignment", "set api_key=EXAMPLEa8f3Kq92LmZx7Wv then",
          "EXAMPLEa8f3Kq92LmZx7Wv"),
)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _on_disk(directory: Path, secret: str) -> list[str]:
    """The files under ``directory`` (the database, its WAL...) holding ``secret``."""
    forms = {secret.encode(), json.dumps(secret)[1:-1].encode()}
    return [p.name for p in directory.iterdir()
            if p.is_file() and any(form in p.read_bytes() for form in forms)]


# -- the rules ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [pytest.param(s, id=s.id) for s in SHAPES])
def test_every_shape_is_masked_as_data_and_as_text(shape: Shape) -> None:
    as_data = json.dumps(mask_secrets(shape.value))
    as_text = mask_text(f"upstream said: {_text(shape.value)}")
    as_repr = mask_text(f"ValueError({shape.value!r})")

    assert shape.secret not in as_data and MASK in as_data
    assert shape.secret not in as_text and shape.secret not in as_repr


@pytest.mark.parametrize("shape", [pytest.param(s, id=s.id) for s in SHAPES
                                   if isinstance(s.value, str)])
async def test_the_pii_detector_finds_the_same_secrets(shape: Shape) -> None:
    found = await PIIDetector(detection_types=["api-key"]).detect(shape.value)

    assert any(d.start <= shape.value.index(shape.secret) < d.end for d in found)


@pytest.mark.parametrize(("name", "secret"), [
    ("auth", True), ("pwd", True), ("passphrase", True), ("cookie", True),
    ("Set-Cookie", True), ("api_keys", True), ("apiKey", True), ("X-API-Key", True),
    ("AUTHORIZATION", True), ("credentials", True), ("private_key", True),
    ("aws_secret_access_key", True), ("aws_access_key_id", True), ("db_pass", True),
    ("client-secret", True), ("refreshToken", True),
    ("max_tokens", False), ("output_tokens", False), ("author", False), ("keys", False),
    ("bypass", False), ("passenger", False), ("monkey", False), ("cache_key", False),
])
def test_secret_keys_by_name_whatever_the_case_and_separator(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


def test_numbers_under_secret_keys_and_plain_text_stay() -> None:
    data = {"usage": {"output_tokens": 12}, "token": 3, "note": "the password policy",
            "url": "https://example.com/a?b=c", "id": "run-1"}

    assert mask_secrets(data) == data


@pytest.mark.parametrize("text", [
    pytest.param("5f4dcc3b5aa765d61d8327deb882cf99", id="an-id-alone"),
    pytest.param("run 5f4dcc3b5aa765d61d8327deb882cf99 is not suspended", id="a-run-id"),
    pytest.param("RunNotFoundError: thread_id=5f4dcc3b5aa765d61d8327deb882cf99", id="named-id"),
    pytest.param("md5 5f4dcc3b5aa765d61d8327deb882cf99 matches", id="a-digest"),
    pytest.param("fixed in 1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d today", id="git-commit"),
    pytest.param("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 ok",
                 id="sha256"),
    pytest.param("see 123e4567-e89b-12d3-a456-426614174000 here", id="uuid-with-dashes"),
    pytest.param("call ThisIsAVeryLongCamelCaseIdentifierName12 now", id="camel-name"),
    pytest.param("open /usr/lib/python3/site-packages/procflow/runtime/run.py", id="path"),
])
def test_ids_digests_and_names_are_not_taken_for_bare_secrets(text: str) -> None:
    assert mask_text(text) == text


def test_mapping_keys_are_masked_too() -> None:
    masked = mask_secrets({"ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HhGgFfEeDdCc": "github"})

    assert masked == {MASK: "github"}


@pytest.mark.parametrize("unit", [
    pytest.param("password=", id="assignments"), pytest.param("a_", id="key-runs"),
    pytest.param("key ", id="context-words"), pytest.param("x://a:", id="urls"),
    pytest.param('"', id="quotes"), pytest.param("api_key: [", id="lists"),
    pytest.param("-----BEGIN RSA PRIVATE KEY-----", id="pem-headers"),
    pytest.param("Bearer ", id="bearer"), pytest.param("A", id="one-long-token"),
    pytest.param("sk-", id="prefixes"), pytest.param("-", id="dashes"),
    pytest.param("aB3/", id="bare-runs"), pytest.param("5f4dcc3b5aa765d61d8327deb882cf9 ",
                                                       id="hex-runs"),
])
def test_masking_takes_linear_time(unit: str) -> None:
    def cost(repeat: int) -> float:
        text = unit * repeat
        start = time.process_time()  # CPU time: other processes do not count
        mask_text(text)
        return time.process_time() - start

    small, large = min(cost(2_000) for _ in range(5)), min(cost(16_000) for _ in range(5))
    assert large / max(small, 1e-4) < 8 * 3  # 8x the input: linear is ~8x, quadratic ~64x


# -- the probe: secrets through a real SQLite file -----------------------------------

_IDS = [pytest.param(s, id=s.id) for s in SHAPES]


@pytest.mark.parametrize("shape", _IDS)
async def test_a_secret_in_the_request_context_or_an_error_never_reaches_the_file(
        tmp_path: Path, shape: Shape) -> None:
    def call_upstream(ctx: Any) -> None:
        payload = ctx.request_context["upstream"]
        raise RuntimeError(f"upstream rejected {_text(payload)}") from ValueError(
            _text(payload))

    wf = (create_workflow(id="probe").then(create_step(id="prepare", execute=lambda c: 1))
          .then(create_step(id="call", execute=call_upstream)).commit())
    context = RequestContext(upstream=shape.value)
    context.set("plan", "pro", persist=True)
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        result = await wf.create_run(run_id="r1", storage=storage).start(
            request_context=context)
        trace = await storage.load_trace("r1")
        snapshot = await storage.load_snapshot("probe", "r1")

    assert result.status == "failed" and shape.secret in str(result.error)  # in memory only
    assert _on_disk(tmp_path, shape.secret) == []
    assert trace is not None and MASK in json.dumps(list(trace.spans))
    assert snapshot is not None and snapshot[0].request_context == {"plan": "pro"}


@pytest.mark.parametrize("shape", _IDS)
async def test_a_secret_in_a_step_output_is_masked_in_the_stored_trace(
        tmp_path: Path, shape: Shape) -> None:
    wf = (create_workflow(id="probe")
          .then(create_step(id="fetch", execute=lambda c: {"got": c.request_context["x"]}))
          .then(create_step(id="use", execute=lambda c: [c.input_data, "done"])).commit())
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        result = await wf.create_run(run_id="r1", storage=storage).start(
            request_context={"x": shape.value})
    with sqlite3.connect(tmp_path / "runs.db") as db:
        (stored_trace,) = db.execute("SELECT data FROM traces WHERE run_id = 'r1'").fetchone()

    # Step outputs are the run's data, kept in clear in the steps table so that a
    # restart can skip the steps that finished (README, "Durability and data").
    assert result.status == "success"
    assert shape.secret not in stored_trace and MASK in stored_trace


async def test_a_restart_gets_the_unstored_context_entries_again(tmp_path: Path) -> None:
    key = "sk-live-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1"
    calls: list[str] = []

    def charge(ctx: Any) -> str:
        calls.append(ctx.request_context.get("api_key", "missing"))
        if len(calls) == 1:
            raise RuntimeError("gateway down")
        return "charged"

    wf = create_workflow(id="pay").then(create_step(id="charge", execute=charge)).commit()
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        await wf.create_run(run_id="r1", storage=storage).start(
            request_context={"api_key": key})
        again = await wf.get_run("r1", storage=storage)
        result = await again.restart(request_context={"api_key": key})

    assert result.status == "success" and calls == [key, key]
    assert _on_disk(tmp_path, key) == []
