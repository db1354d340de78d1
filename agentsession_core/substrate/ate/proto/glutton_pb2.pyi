from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WriteMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WRITE_MODE_TRUNCATE: _ClassVar[WriteMode]
    WRITE_MODE_OVERWRITE: _ClassVar[WriteMode]
    WRITE_MODE_OVERWRITE_ROTATE: _ClassVar[WriteMode]

class ReadMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_MODE_DATA: _ClassVar[ReadMode]
    READ_MODE_DIGEST_ONLY: _ClassVar[ReadMode]
WRITE_MODE_TRUNCATE: WriteMode
WRITE_MODE_OVERWRITE: WriteMode
WRITE_MODE_OVERWRITE_ROTATE: WriteMode
READ_MODE_DATA: ReadMode
READ_MODE_DIGEST_ONLY: ReadMode

class WriteRAMRequest(_message.Message):
    __slots__ = ("key", "size", "write_mode")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    WRITE_MODE_FIELD_NUMBER: _ClassVar[int]
    key: str
    size: str
    write_mode: WriteMode
    def __init__(self, key: _Optional[str] = ..., size: _Optional[str] = ..., write_mode: _Optional[_Union[WriteMode, str]] = ...) -> None: ...

class WriteRAMResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadRAMRequest(_message.Message):
    __slots__ = ("key", "size")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    key: str
    size: str
    def __init__(self, key: _Optional[str] = ..., size: _Optional[str] = ...) -> None: ...

class ReadRAMResponse(_message.Message):
    __slots__ = ("size", "checksum")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    size: int
    checksum: int
    def __init__(self, size: _Optional[int] = ..., checksum: _Optional[int] = ...) -> None: ...

class WriteDiskRequest(_message.Message):
    __slots__ = ("key", "size", "write_mode")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    WRITE_MODE_FIELD_NUMBER: _ClassVar[int]
    key: str
    size: int
    write_mode: WriteMode
    def __init__(self, key: _Optional[str] = ..., size: _Optional[int] = ..., write_mode: _Optional[_Union[WriteMode, str]] = ...) -> None: ...

class WriteDiskResponse(_message.Message):
    __slots__ = ("size", "sha256")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: bytes
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[bytes] = ...) -> None: ...

class ReadDiskRequest(_message.Message):
    __slots__ = ("key", "read_mode")
    KEY_FIELD_NUMBER: _ClassVar[int]
    READ_MODE_FIELD_NUMBER: _ClassVar[int]
    key: str
    read_mode: ReadMode
    def __init__(self, key: _Optional[str] = ..., read_mode: _Optional[_Union[ReadMode, str]] = ...) -> None: ...

class ReadDiskResponse(_message.Message):
    __slots__ = ("size", "sha256", "data")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: bytes
    data: bytes
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...

class OpenFDRequest(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class OpenFDResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class Peer(_message.Message):
    __slots__ = ("host", "delay_ms")
    HOST_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    host: str
    delay_ms: int
    def __init__(self, host: _Optional[str] = ..., delay_ms: _Optional[int] = ...) -> None: ...

class GossipRequest(_message.Message):
    __slots__ = ("peers",)
    PEERS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[Peer]
    def __init__(self, peers: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ...) -> None: ...

class GossipResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BurnCPURequest(_message.Message):
    __slots__ = ("duration_ms", "parallelism")
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    duration_ms: int
    parallelism: int
    def __init__(self, duration_ms: _Optional[int] = ..., parallelism: _Optional[int] = ...) -> None: ...

class BurnCPUResponse(_message.Message):
    __slots__ = ("iterations",)
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    iterations: int
    def __init__(self, iterations: _Optional[int] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("key", "payload", "append")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    key: str
    payload: bytes
    append: bool
    def __init__(self, key: _Optional[str] = ..., payload: _Optional[bytes] = ..., append: _Optional[bool] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("size", "sha256")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: bytes
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[bytes] = ...) -> None: ...

class UseCPURequest(_message.Message):
    __slots__ = ("num_cores", "duty_cycle", "cycle_length_ms", "cap_at_gomaxprocs")
    NUM_CORES_FIELD_NUMBER: _ClassVar[int]
    DUTY_CYCLE_FIELD_NUMBER: _ClassVar[int]
    CYCLE_LENGTH_MS_FIELD_NUMBER: _ClassVar[int]
    CAP_AT_GOMAXPROCS_FIELD_NUMBER: _ClassVar[int]
    num_cores: int
    duty_cycle: float
    cycle_length_ms: int
    cap_at_gomaxprocs: bool
    def __init__(self, num_cores: _Optional[int] = ..., duty_cycle: _Optional[float] = ..., cycle_length_ms: _Optional[int] = ..., cap_at_gomaxprocs: _Optional[bool] = ...) -> None: ...

class UseCPUResponse(_message.Message):
    __slots__ = ("num_cores",)
    NUM_CORES_FIELD_NUMBER: _ClassVar[int]
    num_cores: int
    def __init__(self, num_cores: _Optional[int] = ...) -> None: ...
