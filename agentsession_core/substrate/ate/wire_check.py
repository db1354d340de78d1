"""Catches answers that parse but were written to a different schema, and schemas that
disagree with the newest control API.

Protobuf parsers keep a field whose wire type does not match its declaration as an unknown
field and leave the declared field at its zero value; a glutton from before the ate wire
notes' newest layout, for instance, would then read as "size 0" instead of failing. New field
numbers stay welcome (that is forward compatibility); a known number with the wrong wire type
is a schema disagreement and is reported here (mismatched_field, on every answer).

Before any answer, schema_differences holds our own ateapi.proto against the newest layout
(ateapi_sep.proto, the interop check of tests/unit/test_ate_interop.py): every method and field
the client declares must mean the same there, so nothing it sends is a removed field and
nothing it reads is one the newest servers have stopped setting.
"""

from __future__ import annotations

from google.protobuf.descriptor import (
    Descriptor,
    EnumDescriptor,
    FieldDescriptor,
    FileDescriptor,
)
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

# Message types with a message-typed field, by descriptor (filled on first sight). Every glutton
# answer is flat, so on the router's hot path the check is one look at the unknown fields.
_NESTED: dict[Descriptor, bool] = {}


def _nested(descriptor: Descriptor) -> bool:
    nested = _NESTED.get(descriptor)
    if nested is None:
        nested = any(f.type == FieldDescriptor.TYPE_MESSAGE for f in descriptor.fields)
        _NESTED[descriptor] = nested
    return nested


def _keeps_unknown_fields(message: Message) -> bool:
    """Whether any message in `message`'s tree kept an unknown field: its encoded size
    against that of a copy without them. All of it runs in the protobuf runtime (~3 µs for
    an Actor answer), where walking the tree in Python takes ~15 µs: on the control plane's
    hot path (a SuspendActor per turnover swap) most answers have none."""
    bare = type(message)()
    bare.CopyFrom(message)
    bare.DiscardUnknownFields()
    return bare.ByteSize() != message.ByteSize()


def mismatched_field(message: Message, path: str = "") -> str | None:
    """The dotted path of the first declared field that arrived with the wrong wire type in
    `message` or any message inside it; None when there is none."""
    descriptor = message.DESCRIPTOR
    if not path and _nested(descriptor) and not _keeps_unknown_fields(message):
        return None
    unknowns = UnknownFieldSet(message)
    if len(unknowns):
        declared = descriptor.fields_by_number
        for unknown in unknowns:
            field = declared.get(unknown.field_number)
            if field is not None:
                return (
                    f"{path}{field.name} (field {unknown.field_number}, "
                    f"wire type {unknown.wire_type})"
                )
    if not _nested(descriptor):
        return None
    for field, value in message.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            # Map entries are string→string here; nothing inside them can disagree.
            continue
        children = value if field.is_repeated else [value]
        for index, child in enumerate(children):
            where = f"{path}{field.name}" + (f"[{index}]." if field.is_repeated else ".")
            found = mismatched_field(child, where)
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------------------------------------
# schema against schema: the client's ateapi.proto against the newest layout (ateapi_sep.proto)


def schema_differences(ours: FileDescriptor, newest: FileDescriptor) -> list[str]:
    """Every way a peer built from `ours` would disagree on the wire with one built from
    `newest`, as one line each; empty when `ours` is a faithful subset.

    Checked: each of our methods exists in the newest service with the same request and
    answer messages; each of our fields exists there under the same number, name, type and
    cardinality (a field the newest layout dropped would be sent to a server that ignores it,
    or read from one that never sets it); each of our enum values has the same number. What
    the newest layout has beyond ours is fine: it arrives as unknown fields, kept and ignored.
    """
    found: list[str] = []
    for service in ours.services_by_name.values():
        theirs = newest.services_by_name.get(service.name)
        if theirs is None:
            found.append(f"service {service.full_name}: not in the newest layout")
            continue
        for method in service.methods:
            other = theirs.methods_by_name.get(method.name)
            if other is None:
                found.append(f"{service.full_name}/{method.name}: not in the newest layout")
                continue
            for side in ("input_type", "output_type"):
                mine, their = getattr(method, side), getattr(other, side)
                if mine.full_name != their.full_name:
                    found.append(
                        f"{service.full_name}/{method.name}: {side} {mine.full_name}, "
                        f"newest {their.full_name}"
                    )
    for message in ours.message_types_by_name.values():
        found += _message_differences(message, newest.pool)
    for enum in ours.enum_types_by_name.values():
        found += _enum_differences(enum, newest.pool)
    return found


def _message_differences(message: Descriptor, pool: DescriptorPool) -> list[str]:
    try:
        theirs = pool.FindMessageTypeByName(message.full_name)
    except KeyError:
        return [f"message {message.full_name}: not in the newest layout"]
    found: list[str] = []
    for field in message.fields:
        where = f"{message.full_name}.{field.name} ({field.number})"
        other = theirs.fields_by_number.get(field.number)
        if other is None:
            found.append(f"{where}: no field {field.number} in the newest layout")
            continue
        if other.name != field.name:
            found.append(f"{where}: named {other.name} in the newest layout")
        if other.type != field.type or _type_name(other) != _type_name(field):
            found.append(f"{where}: type {_shown(field)}, newest {_shown(other)}")
        if other.is_repeated != field.is_repeated:
            found.append(f"{where}: repeated {field.is_repeated}, newest {other.is_repeated}")
    for nested in message.nested_types:
        if not nested.GetOptions().map_entry:  # a map's entry is checked as its field's type
            found += _message_differences(nested, pool)
    for enum in message.enum_types:
        found += _enum_differences(enum, pool)
    return found


def _enum_differences(enum: EnumDescriptor, pool: DescriptorPool) -> list[str]:
    try:
        theirs = pool.FindEnumTypeByName(enum.full_name)
    except KeyError:
        return [f"enum {enum.full_name}: not in the newest layout"]
    return [
        f"{enum.full_name}.{value.name} = {value.number}: "
        f"{theirs.values_by_number[value.number].name} in the newest layout"
        if value.number in theirs.values_by_number
        else f"{enum.full_name}.{value.name} = {value.number}: not in the newest layout"
        for value in enum.values
        if theirs.values_by_number.get(value.number) is None
        or theirs.values_by_number[value.number].name != value.name
    ]


def _type_name(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        return str(field.message_type.full_name)
    if field.enum_type is not None:
        return str(field.enum_type.full_name)
    return ""


def _shown(field: FieldDescriptor) -> str:
    return _type_name(field) or _TYPE_NAMES.get(field.type, str(field.type))


_TYPE_NAMES = {
    number: name.removeprefix("TYPE_").lower()
    for name, number in vars(FieldDescriptor).items()
    if name.startswith("TYPE_") and isinstance(number, int)
}
