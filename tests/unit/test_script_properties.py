"""Property tests: generated scripts round-trip; mutated files only ever fail as ScriptError
with a message that names a place."""

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsession_core.script import (
    Op,
    Script,
    ScriptError,
    Step,
    budget,
    builtin_dir,
    decode,
    encode,
)

SOURCE = "mutant.yaml"
# `<source>: <where>: <detail>`; where is a YAML position, the file, a top-level field, or a
# step (with its name when it has one) and op.
PLACE = re.compile(
    r"mutant\.yaml: (line \d+, column \d+|file|top level|name|min_actor_memory|steps|"
    r'step \d+( \(".*"\))?(: op \d+)?): \S'
)
BUILT_IN_TEXTS = [
    (builtin_dir() / f"{name}.yaml").read_text(encoding="utf-8")
    for name in ("smoke", "coding-session")
]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_loads_or_names_a_place(text: str | bytes) -> None:
    try:
        decode(text, SOURCE)
    except ScriptError as exc:
        message = str(exc)
        assert PLACE.match(message), message
        assert "\n" not in message


# ---------------------------------------------------------------- generated valid scripts

keys = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
texts = st.text(min_size=1, max_size=30).filter(lambda s: s.strip())
sizes = st.one_of(st.integers(1, 2**40), st.integers(1, 2**10).map(lambda n: n * 2**20))


@st.composite
def scripts(draw) -> Script:
    ram_keys = draw(st.lists(keys, max_size=3, unique=True))
    disk_keys = draw(st.lists(keys, max_size=3, unique=True))
    # The first step writes every key, so later readers are always in order.
    writers = [Op(kind="fill_ram", key=k, size=draw(sizes)) for k in ram_keys] + [
        Op(kind=draw(st.sampled_from(["ingest", "write_disk"])), key=k, size=draw(sizes))
        for k in disk_keys
    ]
    any_op = st.one_of(
        st.just(Op(kind="ping")),
        st.builds(
            Op, kind=st.just("burn_cpu"), millis=st.integers(1, 10**6), parallel=st.integers(0, 64)
        ),
        st.builds(Op, kind=st.just("dwell"), millis=st.integers(1, 10**6)),
        *(
            [
                st.builds(
                    Op,
                    kind=st.sampled_from(["churn_ram", "fill_ram"]),
                    key=st.sampled_from(ram_keys),
                    size=sizes,
                ),
                st.builds(Op, kind=st.just("walk_ram"), key=st.sampled_from(ram_keys)),
            ]
            if ram_keys
            else []
        ),
        *(
            [
                st.builds(
                    Op,
                    kind=st.sampled_from(["read_disk_digest", "read_disk_data"]),
                    key=st.sampled_from(disk_keys),
                )
            ]
            if disk_keys
            else []
        ),
    )
    # A step name has no '/': a mix's rows put the script's name after one (docs/SPEC.md §1.3).
    step_names = texts.filter(lambda s: "/" not in s)
    names = draw(st.lists(step_names, min_size=1, max_size=5, unique=True))
    steps = []
    for index, name in enumerate(names):
        ops = draw(st.lists(any_op, min_size=0 if index == 0 and writers else 1, max_size=4))
        steps.append(
            Step(
                name=name,
                agent=draw(texts),
                think_ns=draw(st.integers(1, 10**13)),
                ops=tuple(writers + ops if index == 0 else ops),
            )
        )
    draft = Script(name="x", min_actor_memory=1, steps=tuple(steps))
    return Script(
        name=draw(st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True)),
        min_actor_memory=budget(draft).total_bytes + draw(st.integers(1, 2**30)),
        steps=tuple(steps),
    )


@FAST
@given(scripts())
def test_generated_scripts_round_trip(script):
    text = encode(script)
    assert decode(text, "generated") == script
    assert encode(decode(text, "generated")) == text


# ------------------------------------------------------------------------------ mutations

ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.sampled_from(["0", "-1Gi", "1.5", "1m", "2s", "0s", "1e999", "ping", "", "  "]),
)


def paths_of(node, prefix=()):
    """Every (container path, key) in a plain YAML structure."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix, key
            yield from paths_of(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield prefix, index
            yield from paths_of(value, (*prefix, index))


def container(data, path):
    for part in path:
        data = data[part]
    return data


@st.composite
def mutated_documents(draw) -> str:
    data = yaml.safe_load(draw(st.sampled_from(BUILT_IN_TEXTS)))
    for _ in range(draw(st.integers(1, 3))):
        spots = list(paths_of(data))
        if not spots:
            break
        path, key = draw(st.sampled_from(spots))
        parent = container(data, path)
        action = draw(st.sampled_from(["drop", "duplicate", "retype", "rename"]))
        if action == "drop":
            del parent[key]
        elif action == "duplicate" and isinstance(parent, list):
            parent.insert(key, parent[key])
        elif action == "duplicate":
            parent[f"{key}"] = parent[key]  # an int key duplicated as a string
        elif action == "retype":
            parent[key] = draw(ODD_VALUES)
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = parent.pop(key)
        else:
            parent[key] = {draw(st.text(max_size=8)): parent[key]}
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


@FAST
@given(mutated_documents())
def test_mutated_structures_fail_only_as_script_errors(text):
    assert_loads_or_names_a_place(text)


@FAST
@given(
    st.sampled_from(BUILT_IN_TEXTS),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 8), st.binary(max_size=6)), max_size=4),
)
def test_garbled_bytes_fail_only_as_script_errors(text, edits):
    data = bytearray(text.encode())
    for where, cut, insert in edits:
        at = int(where * len(data))
        data[at : at + cut] = insert
    assert_loads_or_names_a_place(bytes(data))


@FAST
@given(
    st.sampled_from(BUILT_IN_TEXTS),
    st.lists(
        st.tuples(
            st.floats(0, 1),
            st.integers(0, 4),
            st.text(alphabet=":-{}[]'\"#&*!|>%@`, \n\t", max_size=4),
        ),
        max_size=4,
    ),
)
def test_garbled_yaml_fails_only_as_script_errors(text, edits):
    for where, cut, insert in edits:
        at = int(where * len(text))
        text = text[:at] + insert + text[at + cut :]
    assert_loads_or_names_a_place(text)


@FAST
@given(st.sampled_from(BUILT_IN_TEXTS), st.data())
def test_duplicated_lines_fail_only_as_script_errors(text, data):
    lines = text.splitlines(keepends=True)
    index = data.draw(st.integers(0, len(lines) - 1))
    lines.insert(index, lines[index])
    assert_loads_or_names_a_place("".join(lines))
