"""Run directory layout, atomic writes, logs, redaction and the manifest."""

import logging
import threading

import orjson
import pytest

from agentsession_core.errors import UsageError
from agentsession_core.judge.run_index import parse_location
from agentsession_core.output.run_dir import RunDir, atomic_write, verify_manifest
from agentsession_core.redaction import redact

STARTED = 1_717_243_200.7  # 2024-06-01T12:00:00.7Z


def test_layout_is_upstream_compatible(tmp_path):
    run = RunDir.create(str(tmp_path), "coding-session", "nightly", STARTED)
    expected = (
        tmp_path
        / "runs"
        / "coding-session"
        / "run_date=2024-06-01"
        / "run_ts=1717243200"
        / "run_tag=nightly"
    )
    assert run.path == expected and expected.is_dir() and run.copy == 1
    # The same name, tag and second again: a directory of its own (docs/SPEC.md §7), which
    # the layout's reader still places.
    via_url = RunDir.create(f"file://{tmp_path}", "coding-session", "nightly", STARTED)
    assert via_url.path == expected.with_name("run_tag=nightly.2") and via_url.copy == 2
    third = RunDir.create(str(tmp_path), "coding-session", "nightly", STARTED)
    assert third.path.name == "run_tag=nightly.3"
    ref = parse_location(str(via_url.path))
    assert ref is not None and (ref.name, ref.run_ts, ref.tag) == (
        "coding-session",
        1717243200,
        "nightly.2",
    )


@pytest.mark.parametrize(
    ("dest", "name", "tag", "needle"),
    [
        ("s3://bucket/prefix", "n", "t", "dest 's3://bucket/prefix'"),
        ("http://x/y", "n", "t", "unsupported scheme"),
        ("file://otherhost/x", "n", "t", "local path"),
        ("{tmp}", "../escape", "t", "name '../escape'"),
        ("{tmp}", "n", "a/b", "tag 'a/b'"),
    ],
)
def test_bad_destinations_name_the_parameter(tmp_path, dest, name, tag, needle):
    with pytest.raises(UsageError, match=needle.replace("(", r"\(")):
        RunDir.create(dest.format(tmp=tmp_path), name, tag, STARTED)


def test_atomic_json_and_text_leave_no_temp_files(tmp_path):
    run = RunDir.create(str(tmp_path), "r", "t", STARTED)
    run.write_json("status.json", {"phase": "hold", "stats_generated": False})
    run.write_json("status.json", {"phase": "done", "stats_generated": True})
    run.write_text("script.yaml", "name: smoke\n")
    assert orjson.loads((run.path / "status.json").read_bytes())["phase"] == "done"
    assert sorted(p.name for p in run.path.iterdir()) == ["script.yaml", "status.json"]
    with pytest.raises(ValueError, match="escapes"):
        run.write_text("../outside.txt", "x")


def test_concurrent_writers_do_not_clash(tmp_path):
    run = RunDir.create(str(tmp_path), "r", "t", STARTED)

    def write(i):
        for j in range(20):
            run.write_json("status.json", {"writer": i, "n": j})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert orjson.loads((run.path / "status.json").read_bytes())["n"] == 19
    assert run.files() == ["status.json"]


def test_log_handler_and_append(tmp_path):
    run = RunDir.create(str(tmp_path), "r", "t", STARTED)
    logger = logging.getLogger("agentsession.test_artifacts")
    handler = run.log_handler()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("agentsession: turnover fill done")
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert "agentsession: turnover fill done" in (run.path / "logs.txt").read_text()
    with run.open_append("stats.jsonl") as f:
        f.write('{"a":1}\n')
    with run.open_append("stats.jsonl") as f:
        f.write('{"a":2}\n')
    assert (run.path / "stats.jsonl").read_text().splitlines() == ['{"a":1}', '{"a":2}']


def test_append_text_grows_a_file_and_has_content_sees_it(tmp_path):
    run = RunDir.create(str(tmp_path), "r", "t", STARTED)
    assert not run.has_content("stats_history.csv")
    run.append_text("stats_history.csv", "")  # nothing to add: no file either
    assert not (run.path / "stats_history.csv").exists()
    run.append_text("stats_history.csv", "Timestamp\n")
    run.append_text("stats_history.csv", "1\n")
    assert (run.path / "stats_history.csv").read_text() == "Timestamp\n1\n"
    assert run.has_content("stats_history.csv")


def test_atomic_write_takes_text_or_bytes_and_is_readable_by_others(tmp_path):
    target = tmp_path / "report.html"
    atomic_write(target, "<p>é</p>")
    assert target.read_bytes() == "<p>é</p>".encode()
    atomic_write(target, b"<p>2</p>")
    assert target.read_bytes() == b"<p>2</p>"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_manifest_lists_every_file_and_detects_tampering(tmp_path):
    run = RunDir.create(str(tmp_path), "r", "t", STARTED)
    run.write_json("campaign.json", {"sessions": 10})
    run.write_text("stats.csv", "Type,Name\n")
    run.write_text("plots/latency.svg", "<svg/>")
    run.write_manifest()
    manifest = orjson.loads((run.path / "manifest.json").read_bytes())
    assert [e["path"] for e in manifest["files"]] == [
        "campaign.json",
        "plots/latency.svg",
        "stats.csv",
    ]
    assert all(len(e["sha256"]) == 64 and e["size"] > 0 for e in manifest["files"])
    assert verify_manifest(run.path) == []
    assert verify_manifest(run.path / "manifest.json") == []

    (run.path / "stats.csv").write_text("Type,Nam3\n")  # same size, other bytes
    (run.path / "extra.txt").write_text("x")
    (run.path / "plots" / "latency.svg").unlink()
    problems = verify_manifest(run.path)
    assert any("stats.csv: sha256" in p for p in problems)
    assert any("extra.txt: not in the manifest" in p for p in problems)
    assert any("plots/latency.svg: missing" in p for p in problems)

    (run.path / "campaign.json").write_text("{}")
    assert any("campaign.json: size" in p for p in verify_manifest(run.path))
    (run.path / "manifest.json").write_text("not json")
    assert "unreadable" in verify_manifest(run.path)[0]


def test_verify_without_manifest(tmp_path):
    assert verify_manifest(tmp_path) == [f"{tmp_path / 'manifest.json'}: missing"]


def test_redact_credentials_recursively():
    params = {
        "token": "abc",
        "substrate": "https://user:hunter2@example.test:8443/v1",
        "aws_secret_access_key": "s3cr3t",
        "nested": {"Password": "p", "api-key": "k", "list": [{"bearer_token": "t"}]},
        "template": "benchmark-workloads/glutton",
        "key": "agent_context",  # a script op key, not a credential
        "empty_token": None,
        "sessions": 100,
    }
    out = redact(params)
    assert out["token"] == "***"
    assert out["substrate"] == "https://user:***@example.test:8443/v1"
    assert out["aws_secret_access_key"] == "***"
    assert out["nested"] == {"Password": "***", "api-key": "***", "list": [{"bearer_token": "***"}]}
    assert out["template"] == "benchmark-workloads/glutton"
    assert out["key"] == "agent_context"
    assert out["empty_token"] is None
    assert out["sessions"] == 100
    assert params["token"] == "abc"  # the input is untouched


def test_redact_url_tokens_in_userinfo_and_query() -> None:
    assert redact("https://TOKEN@prom.test/api") == "https://***@prom.test/api"
    assert redact("http://h.test/m?access_token=abc&x=1") == "http://h.test/m?access_token=***&x=1"
    assert redact("http://h.test/m?x=1&y=2") == "http://h.test/m?x=1&y=2"  # untouched
    assert redact({"urls": ["https://u:p@h.test"]}) == {"urls": ["https://u:***@h.test"]}
