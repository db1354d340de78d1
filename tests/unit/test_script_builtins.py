"""The built-in scripts: docs/SPEC.md §1.5's figures, the coding-session table, round trips."""

import re
from pathlib import Path

import pytest

from agentsession_core.script import (
    OP_ARGS,
    budget,
    builtin_dir,
    builtin_names,
    decode,
    encode,
    load_script,
)
from agentsession_core.script.quantity import format_duration, format_quantity, parse_duration

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
    assert builtin_names() == ["coding-session", "personal-assistant-light", "smoke"]


@pytest.mark.parametrize("name", ["coding-session", "personal-assistant-light", "smoke"])
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


@pytest.mark.parametrize("name", ["coding-session", "personal-assistant-light", "smoke"])
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
