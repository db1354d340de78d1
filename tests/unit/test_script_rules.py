"""docs/SPEC.md §1.3's validation rules, one test each, plus strict decoding and bad files.

Each test asserts the whole message a user sees, so a change in wording or place is a
deliberate change here too."""

import textwrap

import pytest

from agentsession_core.script import (
    Op,
    Script,
    ScriptError,
    Step,
    budget,
    decode,
    load_file,
    load_script,
    validate,
)

SRC = "t.yaml"


def script_text(steps: str, *, head: str = "name: t\nmin_actor_memory: 64Mi\n") -> str:
    return head + "steps:\n" + textwrap.indent(textwrap.dedent(steps).strip("\n"), "  ") + "\n"


def error_of(text: str | bytes) -> str:
    with pytest.raises(ScriptError) as caught:
        decode(text, SRC)
    return str(caught.value)


ONE_STEP = """
- name: a
  agent: does a
  think: 1s
  ops:
    - ping: {}
"""


def test_a_minimal_script_decodes():
    script = decode(script_text(ONE_STEP), SRC)
    assert script == Script(
        name="t",
        min_actor_memory=64 * 2**20,
        steps=(Step(name="a", agent="does a", think_ns=10**9, ops=(Op(kind="ping"),)),),
    )
    assert script.steps[0].think_seconds == 1.0


# ---- rule 1: name pattern, at least one step


@pytest.mark.parametrize("name", ["Coding", "-x", "a_b", "a b", '""', "é"])
def test_rule1_name_pattern(name):
    head = f"name: {name}\nmin_actor_memory: 64Mi\n"
    message = error_of(script_text(ONE_STEP, head=head))
    assert message.startswith(f"{SRC}: name: ")
    assert message.endswith("must match ^[a-z0-9][a-z0-9-]*$")


def test_rule1_at_least_one_step():
    assert error_of("name: t\nmin_actor_memory: 1Mi\nsteps: []\n") == (
        f"{SRC}: steps: a script needs at least one step"
    )


# ---- rule 2: per step


def test_rule2_step_name_set():
    text = script_text(ONE_STEP + "- agent: x\n  think: 1s\n  ops: [ping: {}]\n")
    assert error_of(text) == f"{SRC}: step 2: name is not set (line 9)"


def test_rule2_step_agent_set():
    text = script_text("- name: a\n  agent: ''\n  think: 1s\n  ops: [ping: {}]\n")
    assert error_of(text) == f'{SRC}: step 1 ("a"): agent is not set (line 4)'


def test_rule2_step_name_unique():
    text = script_text(ONE_STEP + ONE_STEP)
    assert error_of(text) == f'{SRC}: step 2 ("a"): name "a" is already used by step 1 (line 10)'


@pytest.mark.parametrize(("think", "shown"), [("0s", "0s"), ("0", "0s"), ("-2s", "-2s")])
def test_rule2_think_positive(think, shown):
    text = script_text(f"- name: a\n  agent: x\n  think: {think}\n  ops: [ping: {{}}]\n")
    assert error_of(text) == f'{SRC}: step 1 ("a"): think must be > 0, got {shown} (line 4)'


@pytest.mark.parametrize("ops", ["  ops: []\n", "  ops:\n", ""])
def test_rule2_at_least_one_op(ops):
    text = script_text(f"- name: a\n  agent: x\n  think: 1s\n{ops}")
    assert error_of(text) == f'{SRC}: step 1 ("a"): has no ops; a step needs at least one (line 4)'


@pytest.mark.parametrize(
    ("op", "problem"),
    [
        ("fill_ram: {size: 1Mi}", "fill_ram needs key"),
        ("fill_ram: {key: k}", "fill_ram needs size"),
        ("churn_ram: {key: k}", "churn_ram needs size"),
        ("walk_ram: {}", "walk_ram needs key"),
        ("ingest: {key: k}", "ingest needs size"),
        ("write_disk: {size: 1Ki}", "write_disk needs key"),
        ("read_disk_digest: {}", "read_disk_digest needs key"),
        ("read_disk_data: {}", "read_disk_data needs key"),
        ("burn_cpu: {parallel: 2}", "burn_cpu needs millis"),
        ("dwell: {}", "dwell needs millis"),
        ("ping: {key: k}", "ping takes no key"),
        ("walk_ram: {key: k, size: 1Mi}", "walk_ram takes no size (it takes key)"),
        ("read_disk_data: {key: k, millis: 5}", "read_disk_data takes no millis (it takes key)"),
        ("dwell: {millis: 5, parallel: 1}", "dwell takes no parallel (it takes millis)"),
        ("burn_cpu: {millis: 5, key: k}", "burn_cpu takes no key (it takes millis, parallel)"),
        ("fill_ram: {key: 'a b', size: 1Ki}", 'fill_ram key "a b" must match ^[A-Za-z0-9_-]+$'),
        ("fill_ram: {key: 'a/b', size: 1Ki}", 'fill_ram key "a/b" must match ^[A-Za-z0-9_-]+$'),
        ("burn_cpu: {millis: 0}", "burn_cpu millis must be > 0, got 0"),
        ("dwell: {millis: -3}", "dwell millis must be > 0, got -3"),
        ("burn_cpu: {millis: 5, parallel: -1}", "burn_cpu parallel must be >= 0, got -1"),
    ],
)
def test_rule2_each_op_valid(op, problem):
    text = script_text(
        f"- name: a\n  agent: x\n  think: 1s\n  ops:\n    - ping: {{}}\n    - {op}\n"
    )
    assert error_of(text) == f'{SRC}: step 1 ("a"): op 2: {problem} (line 9)'


@pytest.mark.parametrize(
    ("given", "parallel"), [("", 1), (", parallel: 0", 1), (", parallel: 3", 3)]
)
def test_rule2_parallel_defaults_to_one(given, parallel):
    text = script_text(
        f"- name: a\n  agent: x\n  think: 1s\n  ops: [burn_cpu: {{millis: 5{given}}}]\n"
    )
    assert decode(text, SRC).steps[0].ops[0].parallel == parallel


def test_rule2_size_positive_on_models_built_in_code():
    step = Step(name="a", agent="x", think_ns=1, ops=(Op(kind="fill_ram", key="k", size=0),))
    with pytest.raises(ScriptError) as caught:
        validate(Script(name="t", min_actor_memory=1, steps=(step,)), "code")
    assert str(caught.value) == 'code: step 1 ("a"): op 1: fill_ram size must be > 0, got 0'


# ---- rule 3: ordering over the first lap


@pytest.mark.parametrize(
    ("ops", "problem"),
    [
        (["churn_ram: {key: ctx, size: 1Ki}"], 'churn_ram of array "ctx" before any fill_ram'),
        (["walk_ram: {key: ctx}"], 'walk_ram of array "ctx" before any fill_ram'),
        (
            ["read_disk_digest: {key: x}"],
            'read_disk_digest of file "x" before any ingest or write_disk',
        ),
        (
            ["read_disk_data: {key: x}"],
            'read_disk_data of file "x" before any ingest or write_disk',
        ),
        # A fill of another key, or a write of a file, does not count.
        (["fill_ram: {key: other, size: 1Ki}", "walk_ram: {key: ctx}"], None),
        (["write_disk: {key: ctx, size: 1Ki}", "walk_ram: {key: ctx}"], None),
        (["fill_ram: {key: x, size: 1Ki}", "read_disk_digest: {key: x}"], None),
    ],
)
def test_rule3_reader_before_writer(ops, problem):
    lines = "".join(f"    - {op}\n" for op in ops)
    text = script_text(f"- name: 03_explore\n  agent: x\n  think: 1s\n  ops:\n{lines}")
    message = error_of(text)
    problem = problem or message.split(": op ")[1].split(": ", 1)[1].rsplit(" (line", 1)[0]
    n = len(ops)
    assert message == f'{SRC}: step 1 ("03_explore"): op {n}: {problem} (line {7 + n})'
    assert "before any" in message


def test_rule3_the_spec_example():
    text = script_text(
        """
        - name: 01_a
          agent: x
          think: 1s
          ops: [ping: {}]
        - name: 02_b
          agent: x
          think: 1s
          ops: [ping: {}]
        - name: 03_explore_tree
          agent: x
          think: 1s
          ops:
            - ping: {}
            - read_disk_digest: {key: x}
        """
    )
    assert error_of(text) == (
        f'{SRC}: step 3 ("03_explore_tree"): op 2: read_disk_digest of file "x" before any '
        "ingest or write_disk (line 17)"
    )


def test_rule3_same_step_order_matters_and_later_laps_do_not_count():
    reader_first = script_text(
        """
        - name: a
          agent: x
          think: 1s
          ops:
            - walk_ram: {key: k}
            - fill_ram: {key: k, size: 1Ki}
        """
    )
    assert 'op 1: walk_ram of array "k" before any fill_ram' in error_of(reader_first)
    writer_in_step_2 = script_text(
        """
        - name: a
          agent: x
          think: 1s
          ops: [read_disk_data: {key: f}]
        - name: b
          agent: x
          think: 1s
          ops: [ingest: {key: f, size: 1Ki}]
        """
    )
    assert 'step 1 ("a"): op 1: read_disk_data of file "f"' in error_of(writer_in_step_2)


# ---- rule 4: min_actor_memory


def test_rule4_min_actor_memory_positive():
    step = Step(name="a", agent="x", think_ns=1, ops=(Op(kind="ping"),))
    with pytest.raises(ScriptError) as caught:
        validate(Script(name="t", min_actor_memory=0, steps=(step,)), "code")
    assert str(caught.value) == "code: min_actor_memory: must be > 0, got 0"


def test_rule4_min_actor_memory_covers_ram_and_disk():
    ops = "    - fill_ram: {key: r, size: 2Mi}\n    - write_disk: {key: d, size: 1Mi}\n"
    steps = f"- name: a\n  agent: x\n  think: 1s\n  ops:\n{ops}"
    assert decode(script_text(steps, head="name: t\nmin_actor_memory: 3Mi\n"), SRC)
    message = error_of(script_text(steps, head="name: t\nmin_actor_memory: 3145727\n"))
    assert message == (
        f"{SRC}: min_actor_memory: 3145727 (3145727 bytes) is below the declared RAM + disk "
        "of 3145728 bytes (RAM 2Mi + disk 1Mi; the data dir is tmpfs)"
    )


def test_first_violation_wins():
    # Rule 2 in step 1 (think) beats rule 3 in step 1 and rule 4.
    text = script_text(
        "- name: a\n  agent: x\n  think: 0s\n  ops: [walk_ram: {key: k}]\n",
        head="name: t\nmin_actor_memory: 1\n",
    )
    assert "think must be > 0" in error_of(text)


# ---- budget


def test_budget_sums_the_largest_write_per_key():
    text = script_text(
        """
        - name: a
          agent: x
          think: 1s
          ops:
            - fill_ram: {key: ctx, size: 4Mi}
            - fill_ram: {key: ctx, size: 8Mi}
            - fill_ram: {key: ws, size: 1Mi}
            - churn_ram: {key: ctx, size: 32Mi}
            - ingest: {key: f, size: 1Ki}
            - write_disk: {key: f, size: 3Ki}
            - write_disk: {key: g, size: 2Ki}
            - read_disk_data: {key: g}
            - burn_cpu: {millis: 1}
        """
    )
    declared = budget(decode(text, SRC))
    assert (declared.ram_bytes, declared.disk_bytes) == (9 * 2**20, 5 * 2**10)
    assert declared.total_bytes == 9 * 2**20 + 5 * 2**10


# ---- strict decoding


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- a\n",
            "t.yaml: top level: expected a mapping with name, min_actor_memory, steps, "
            "got a list (line 1)",
        ),
        (
            "just text\n",
            "t.yaml: top level: expected a mapping with name, min_actor_memory, steps, "
            'got "just text"',
        ),
        (
            "name: t\nmin_actor_memory: 1Mi\nsteps: []\nextra: 1\n",
            't.yaml: top level: unknown field "extra" '
            "(known: name, min_actor_memory, steps) (line 4)",
        ),
        ("name: t\nsteps: []\n", "t.yaml: top level: missing field min_actor_memory (line 1)"),
        ("min_actor_memory: 1Mi\nsteps: []\n", "t.yaml: top level: missing field name (line 1)"),
        ("name: t\nmin_actor_memory: 1Mi\n", "t.yaml: top level: missing field steps (line 1)"),
        (
            "name: 7\nmin_actor_memory: 1Mi\nsteps: []\n",
            "t.yaml: name: expected a string, got int 7 (line 1)",
        ),
        (
            "name: t\nmin_actor_memory: 0\nsteps: []\n",
            "t.yaml: min_actor_memory: size 0 must be positive (line 2)",
        ),
        (
            "name: t\nmin_actor_memory: 1.5Gb\nsteps: []\n",
            "t.yaml: min_actor_memory: bad size '1.5Gb': expected a number with an optional unit "
            "(Ki Mi Gi Ti Pi Ei, k M G T P E) or exponent (1e6) (line 2)",
        ),
        (
            "name: t\nmin_actor_memory: 1Mi\nsteps: {a: 1}\n",
            "t.yaml: steps: expected a list of steps, got a mapping (line 3)",
        ),
    ],
)
def test_strict_top_level(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("- 5\n", "step 1: expected a mapping with name, agent, think, ops, got int 5 (line 4)"),
        (
            "- name: a\n  agent: x\n  think: 1s\n  ops: [ping: {}]\n  colour: red\n",
            'step 1 ("a"): unknown field "colour" (known: name, agent, think, ops) (line 8)',
        ),
        (
            "- name: a\n  agent: x\n  ops: [ping: {}]\n",
            'step 1 ("a"): missing field think (line 4)',
        ),
        (
            "- name: [a]\n  agent: x\n  think: 1s\n  ops: [ping: {}]\n",
            "step 1: name: expected a string, got a list (line 4)",
        ),
        (
            "- name: a\n  agent: 3\n  think: 1s\n  ops: [ping: {}]\n",
            'step 1 ("a"): agent: expected a string, got int 3 (line 5)',
        ),
        (
            "- name: a\n  agent: x\n  think: 2\n  ops: [ping: {}]\n",
            'step 1 ("a"): think: expected a duration string like 2s or 500ms, got int 2 (line 6)',
        ),
        (
            "- name: a\n  agent: x\n  think: 2 days\n  ops: [ping: {}]\n",
            """step 1 ("a"): think: bad duration '2 days': unknown unit ' days' """
            "(ns us µs ms s m h) (line 6)",
        ),
        (
            "- name: a\n  agent: x\n  think: 1s\n  ops: {ping: {}}\n",
            'step 1 ("a"): ops: expected a list of ops, got a mapping (line 7)',
        ),
    ],
)
def test_strict_steps(step, message):
    assert error_of(script_text(step)) == f"{SRC}: {message}"


@pytest.mark.parametrize(
    ("op", "problem"),
    [
        ("ping", 'an op is a mapping with exactly one key (the kind), got "ping"'),
        (
            "{ping: {}, dwell: {millis: 1}}",
            "an op is a mapping with exactly one key (the kind), got 2 keys",
        ),
        ("{}", "an op is a mapping with exactly one key (the kind), got 0 keys"),
        (
            "fil_ram: {key: k, size: 1Ki}",
            'unknown op kind "fil_ram" (known: ping, fill_ram, churn_ram, walk_ram, ingest, '
            "write_disk, read_disk_digest, read_disk_data, burn_cpu, dwell)",
        ),
        ("fill_ram: [k, 1Ki]", "fill_ram: expected a mapping of arguments, got a list"),
        (
            "fill_ram: {key: k, sise: 1Ki}",
            'fill_ram: unknown argument "sise" (fill_ram takes key, size)',
        ),
        ("ping: {message: hi}", 'ping: unknown argument "message" (ping takes nothing)'),
        ("fill_ram: {key: 12, size: 1Ki}", "fill_ram key: expected a string, got int 12"),
        ("fill_ram: {key: k, size: 0}", "fill_ram size: size 0 must be positive"),
        ("fill_ram: {key: k, size: -1Mi}", "fill_ram size: size '-1Mi' must be positive"),
        (
            "fill_ram: {key: k, size: 1.5}",
            "fill_ram size: expected a size (integer bytes or a quantity like 32Mi), got float 1.5",
        ),
        (
            "fill_ram: {key: k, size: 1.3Ki}",
            "fill_ram size: size '1.3Ki' is not a whole number of bytes (1331.2)",
        ),
        ("fill_ram: {key: k, size: 12XB}", "fill_ram size: bad size '12XB'"),
        ("burn_cpu: {millis: '500'}", 'burn_cpu millis: expected an integer, got "500"'),
        ("burn_cpu: {millis: 500ms}", 'burn_cpu millis: expected an integer, got "500ms"'),
        ("burn_cpu: {millis: true}", "burn_cpu millis: expected an integer, got bool True"),
        ("burn_cpu: {millis: 1.5}", "burn_cpu millis: expected an integer, got float 1.5"),
        (
            "burn_cpu: {millis: 5, parallel: null}",
            "burn_cpu parallel: expected an integer, got null",
        ),
    ],
)
def test_strict_ops(op, problem):
    text = script_text(f"- name: a\n  agent: x\n  think: 1s\n  ops:\n    - {op}\n")
    message = error_of(text)
    assert message.startswith(f'{SRC}: step 1 ("a"): op 1: {problem}')
    assert message.endswith("(line 8)")


def test_a_fractional_quantity_of_whole_bytes_is_a_size():
    text = script_text(
        "- name: a\n  agent: x\n  think: 1s\n  ops: [fill_ram: {key: k, size: 1.5Ki}]\n"
    )
    assert decode(text, SRC).steps[0].ops[0].size == 1536


def test_op_with_null_arguments_is_an_empty_mapping():
    text = script_text("- name: a\n  agent: x\n  think: 1s\n  ops:\n    - ping:\n")
    assert decode(text, SRC).steps[0].ops == (Op(kind="ping"),)


# ---- YAML syntax, with line and column


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("name: t\nmin_actor_memory: [1Mi\nsteps: []\n", f"{SRC}: line 3, column 6: YAML: "),
        ("name: t\n  bad: indent\n", f"{SRC}: line 2, column 6: YAML: "),
        ("name: t\n\tmin_actor_memory: 1Mi\n", f"{SRC}: line 2, column 1: YAML: "),
        ("name: 'unterminated\n", f"{SRC}: line 2, column 1: YAML: "),
        ("a: 1\n---\nb: 2\n", f"{SRC}: line 2, column 1: YAML: "),
        ("name: *nope\n", f"{SRC}: line 1, column 7: YAML: "),
        ("name: !!python/object:os.system x\n", f"{SRC}: line 1, column 7: YAML: "),
        ("x: &a [*a]\n", f"{SRC}: line 1, column 4: YAML: "),
        ("name: t\u0007\n", f"{SRC}: line 1, column 8: YAML: character U+0007 is not allowed"),
    ],
)
def test_yaml_syntax_errors_name_line_and_column(text, start):
    assert error_of(text).startswith(start)


def test_duplicate_keys_are_errors_with_line_and_column():
    text = script_text(ONE_STEP).replace("think: 1s", "think: 1s\n    think: 2s")
    assert error_of(text) == (
        f'{SRC}: line 7, column 5: YAML: duplicate key "think" (first at line 6)'
    )


# ---- whole files


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", f"{SRC}: file: empty; a script needs name, min_actor_memory, steps"),
        (
            b"   \n# only a comment\n",
            f"{SRC}: file: empty; a script needs name, min_actor_memory, steps",
        ),
        (
            b"name: t\n\x00\x01\x02",
            f"{SRC}: file: binary data (NUL byte at offset 8); a script is YAML text (line 2)",
        ),
        (b"name: caf\xe9\n", f"{SRC}: file: not UTF-8 text (byte 0xe9 at offset 9) (line 1)"),
        (b"#" * (2**20 + 1), f"{SRC}: file: 1048577 bytes is over the 1 MiB limit for a script"),
    ],
)
def test_bad_whole_files(data, message):
    assert error_of(data) == message


def test_a_bom_is_ignored():
    assert decode(b"\xef\xbb\xbf" + script_text(ONE_STEP).encode(), SRC).name == "t"


def test_file_paths(tmp_path):
    with pytest.raises(ScriptError, match=r"missing\.yaml: file: no such file$"):
        load_file(tmp_path / "missing.yaml")
    with pytest.raises(ScriptError, match=r": file: is a directory, not a script file$"):
        load_file(tmp_path)
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(50 * 2**20)
    with pytest.raises(ScriptError) as caught:
        load_script(str(big))
    assert str(caught.value) == f"{big}: file: 52428800 bytes is over the 1 MiB limit for a script"
    good = tmp_path / "mine.yaml"
    good.write_text(script_text(ONE_STEP))
    assert load_script(str(good)).name == "t"


def test_unknown_name_lists_the_built_ins():
    with pytest.raises(ScriptError) as caught:
        load_script("no-such-script")
    assert str(caught.value) == (
        "no-such-script: file: no such file, and not a built-in script (built-ins: "
        "coding-session, personal-assistant, personal-assistant-light, smoke)"
    )


def test_messages_are_one_line():
    name = "a\nb"
    step = Step(name=name, agent="x", think_ns=0, ops=(Op(kind="ping"),))
    with pytest.raises(ScriptError) as caught:
        validate(Script(name="t", min_actor_memory=1, steps=(step,)), "src\nfile")
    assert "\n" not in str(caught.value)
    assert 'step 1 ("a\\nb"): think must be > 0' in str(caught.value)


def test_models_built_in_code_take_lists_and_stay_hashable():
    script = Script(
        name="t",
        min_actor_memory=1,
        steps=[Step(name="a", agent="x", think_ns=1, ops=[Op(kind="burn_cpu", millis=5)])],
    )
    assert isinstance(script.steps, tuple) and isinstance(script.steps[0].ops, tuple)
    assert script.steps[0].ops[0].parallel == 1
    assert len({script, script.model_copy()}) == 1


def test_oversized_text_is_refused_before_parsing():
    assert error_of("#" * (2**20 + 1)) == (
        f"{SRC}: file: 1048577 characters is over the 1 MiB limit for a script"
    )
