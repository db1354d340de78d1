"""The built-in scripts: docs/SPEC.md §1.5's figures, the coding-session table, round trips."""

import re
from pathlib import Path

import pytest

from agentsession_core.script import (
    OP_ARGS,
    Script,
    budget,
    builtin_dir,
    builtin_names,
    decode,
    encode,
    load_script,
)
from agentsession_core.script.builtin_table import builtin_table
from agentsession_core.script.quantity import format_duration, format_quantity, parse_duration
from agentsession_core.substrate.op_limits import OpLimits, over_limits

MiB = 2**20

# docs/SPEC.md §1.5's table, copied verbatim: the built-in must match it exactly.
CODING_SESSION_TABLE = """
| 1 | 01_read_task | 2s | fill_ram agent_context 32Mi; ping |
| 2 | 02_clone_repo | 3s | ingest repo_tarball 16Mi; burn_cpu 500ms ×1 |
| 3 | 03_explore_tree | 4s | read_disk_digest repo_tarball; burn_cpu 200ms ×1 |
| 4 | 04_read_key_files | 3s | read_disk_data repo_tarball; churn_ram agent_context 8Mi |
| 5 | 05_install_deps | 2s | ingest deps_cache 32Mi; burn_cpu 1500ms ×2 |
| 6 | 06_first_build | 3s | fill_ram compiler_ws 64Mi; burn_cpu 3000ms ×2; write_disk build_artifacts 24Mi |
| 7 | 07_run_unit_tests | 2s | read_disk_digest build_artifacts; burn_cpu 2500ms ×2 |
| 8 | 08_reason_about_failure | 8s | walk_ram agent_context; ping |
| 9 | 09_edit_source | 5s | ingest patch 64Ki; write_disk repo_tarball 4Mi |
| 10 | 10_incremental_build | 2s | burn_cpu 1200ms ×2; write_disk build_artifacts 8Mi |
| 11 | 11_rerun_failed_test | 2s | burn_cpu 800ms ×1 |
| 12 | 12_write_new_tests | 6s | ingest patch 128Ki; write_disk test_fixtures 2Mi |
| 13 | 13_run_new_tests | 2s | read_disk_digest test_fixtures; burn_cpu 1000ms ×1 |
| 14 | 14_full_test_suite | 3s | burn_cpu 4000ms ×2; read_disk_digest build_artifacts; churn_ram agent_context 8Mi |
| 15 | 15_lint_format | 2s | read_disk_digest repo_tarball; burn_cpu 900ms ×1 |
| 16 | 16_refactor | 8s | ingest patch 512Ki; write_disk repo_tarball 6Mi; burn_cpu 600ms ×1 |
| 17 | 17_rebuild | 2s | churn_ram compiler_ws 32Mi; burn_cpu 2000ms ×2; write_disk build_artifacts 16Mi |
| 18 | 18_final_test_suite | 2s | burn_cpu 3500ms ×2 |
| 19 | 19_package_artifact | 3s | read_disk_digest build_artifacts; burn_cpu 1000ms ×1; write_disk release_package 24Mi |
| 20 | 20_commit_and_summarize | 5s | write_disk repo_tarball 256Ki; read_disk_data release_package; walk_ram agent_context |
"""  # noqa: E501


def op_text(op) -> str:
    if op.kind == "burn_cpu":
        return f"burn_cpu {op.millis}ms ×{op.parallel}"
    if op.kind == "dwell":
        return f"dwell {op.millis}ms"
    parts = [op.kind, op.key, format_quantity(op.size) if op.size else None]
    return " ".join(p for p in parts if p)


def test_the_built_ins():
    assert builtin_names() == [
        "coding-session",
        "personal-assistant",
        "personal-assistant-light",
        "smoke",
    ]


@pytest.mark.parametrize(
    "name", ["coding-session", "personal-assistant", "personal-assistant-light", "smoke"]
)
def test_built_in_name_is_the_file_stem(name):
    assert load_script(name).name == name
    assert (builtin_dir() / f"{name}.yaml").is_file()


def test_coding_session_figures():
    script = load_script("coding-session")
    declared = budget(script)
    assert len(script.steps) == 20
    assert script.ops_per_lap == 44
    assert declared.ram_bytes == 100663296 == 96 * 2**20
    assert declared.disk_bytes == 103284736 == int(98.5 * 2**20)
    assert script.min_actor_memory == 1073741824
    assert script.think_ns_per_lap == 69 * 10**9


def test_coding_session_is_the_spec_table():
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in CODING_SESSION_TABLE.strip().splitlines()
    ]
    script = load_script("coding-session")
    assert len(rows) == len(script.steps)
    for (number, name, think, ops), step in zip(rows, script.steps, strict=True):
        assert step.name == name, number
        assert step.think_ns == parse_duration(think), name
        assert [op_text(op) for op in step.ops] == ops.split("; "), name


def test_smoke_is_tiny_and_uses_every_op_kind():
    script = load_script("smoke")
    kinds = {op.kind for step in script.steps for op in step.ops}
    assert kinds == set(OP_ARGS)
    assert all(step.think_ns < 10**9 for step in script.steps)
    sizes = [op.size for step in script.steps for op in step.ops if op.size]
    assert sizes and all(size < 2**20 for size in sizes)
    assert script.min_actor_memory <= 64 * 2**20


def test_personal_assistant_light_shape():
    script = load_script("personal-assistant-light")
    ops = [op for step in script.steps for op in step.ops]
    assert len(script.steps) >= 8
    assert format_duration(script.steps[0].think_ns) == "55m0s"
    assert script.min_actor_memory <= 256 * 2**20
    assert any(op.kind == "dwell" for op in ops)
    assert all(op.millis <= 500 for op in ops if op.kind == "burn_cpu")
    files = [op.size for op in ops if op.kind in ("ingest", "write_disk")]
    assert files and all(2**10 <= size <= 4 * 2**20 for size in files)
    # The header comment documents the design: one table row per step, with its think.
    text = (builtin_dir() / "personal-assistant-light.yaml").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    for step in script.steps:
        think = re.sub(r"(?<=[hm])0s$", "", format_duration(step.think_ns))
        rows = [line for line in header if f"| {step.name} " in line]
        assert len(rows) == 1, step.name
        assert f"| {think} " in rows[0], (step.name, think)


def heap_through_the_lap(script: Script) -> list[int]:
    """The declared RAM after each step: Σ over keys of the largest fill_ram so far."""
    held: dict[str, int] = {}
    out = []
    for step in script.steps:
        for op in step.ops:
            if op.kind == "fill_ram" and op.key and op.size:
                held[op.key] = max(held.get(op.key, 0), op.size)
        out.append(sum(held.values()))
    return out


def test_personal_assistant_is_the_published_day():
    """Upstream's published description (a simulated day): ~61 wakes, heap 640 -> ~960 MiB,
    ~150 MiB written, ~65 CPU-seconds, 50-110 KiB contexts shipped out, heartbeats and crons,
    about 30 user messages in 7 clusters; and the local substrate's default template and caps
    take it."""
    script = load_script("personal-assistant")
    ops = [op for step in script.steps for op in step.ops]
    assert len(script.steps) == 61  # one wake a step
    assert script.think_ns_per_lap == 24 * 3600 * 10**9  # a day
    heap = heap_through_the_lap(script)
    assert heap[0] == 640 * MiB and heap[-1] == 960 * MiB
    assert heap == sorted(heap) and len(set(heap)) >= 5  # it grows through the day, in steps
    written = sum(op.size or 0 for op in ops if op.kind in ("ingest", "write_disk"))
    assert 140 * MiB <= written <= 160 * MiB
    cpu_ms = sum((op.millis or 0) * (op.parallel or 1) for op in ops if op.kind == "burn_cpu")
    assert 60_000 <= cpu_ms <= 70_000
    shipped = {op.key for op in ops if op.kind == "read_disk_data"}
    contexts = [op.size for op in ops if op.key in shipped and op.kind == "write_disk"]
    assert len(contexts) == 30 and min(contexts) == 50 * 2**10 and max(contexts) == 110 * 2**10
    names = [step.name for step in script.steps]
    assert sum("_cron" in n for n in names) == 24 and sum("_heartbeat" in n for n in names) == 7
    messages = [n for n in names if "_message_" in n]
    assert len(messages) == 30 and len({n.split("_")[-1].split("m")[0] for n in messages}) == 7
    # The local substrate's default template (1Gi) and caps (256Mi an op) take it.
    assert budget(script).total_bytes <= script.min_actor_memory <= 2**30
    assert over_limits(script, OpLimits(256 * MiB, 60_000, 16)) is None


@pytest.mark.parametrize(
    "name", ["coding-session", "personal-assistant", "personal-assistant-light", "smoke"]
)
def test_built_ins_round_trip_and_encode_is_stable(name):
    script = load_script(name)
    text = encode(script)
    again = decode(text, f"encoded {name}")
    assert again == script
    assert hash(again) == hash(script)
    assert encode(again) == text


def test_encode_is_canonical():
    text = encode(load_script("coding-session"))
    lines = text.splitlines()
    assert lines[:3] == ["name: coding-session", "min_actor_memory: 1Gi", "steps:"]
    assert "      - burn_cpu: {millis: 500, parallel: 1}" in lines
    assert "      - ping: {}" in lines
    assert "      - read_disk_digest: {key: repo_tarball}" in lines
    assert "      - write_disk: {key: repo_tarball, size: 256Ki}" in lines
    assert "    think: 2s" in lines
    assert "#" not in text


def test_encode_quotes_what_yaml_would_misread():
    source = Path(builtin_dir() / "smoke.yaml").read_text()
    tricky = source.replace("agent: Boots and fills a small context", 'agent: "yes"', 1)
    tricky = tricky.replace("name: 02_upload", 'name: "2: upload # not a comment"', 1)
    script = decode(tricky, "tricky")
    text = encode(script)
    assert 'agent: "yes"' in text
    assert decode(text, "again") == script


def test_the_guide_s_table_is_the_registry_s():
    """docs/guide/scripts.md shows builtin_table()'s output between its markers: regenerate
    it there when a built-in changes."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "scripts.md").read_text()
    shown = guide.split("<!-- builtin-table:begin -->")[1].split("<!-- builtin-table:end -->")[0]
    assert shown.strip() == builtin_table().strip()
