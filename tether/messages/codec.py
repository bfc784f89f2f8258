"""The one codec for tether's messages: frozen dataclass <-> msgpack bytes.

A message is encoded as a msgpack array `[tag, field1, field2, ...]` where the tag names
the class (its registry index is not used, so old and new peers agree on names) and the
fields follow the dataclass field order. Field values must be msgpack-able; tuples come
back as lists, so message fields use lists. A registered dataclass may also sit inside a
field (a spare kernel inside the args of the `Execute` that adopts it): it travels as a
msgpack extension holding its own `[tag, fields...]`, and comes back as its class.

What thespian carries between actors is then either `bytes` or `(bytes, address)`: the
address of an actor (which we never put inside a message body) rides beside the payload.
Thespian still pickles that outer tuple; see `tether.host.thespian_patches` for why that is only
ever reachable from this machine.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

import msgpack

from tether.messages import calls, control, kernel_ops

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_CLASSES: dict[str, type] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}


def register(cls: type) -> type:
    """Make a frozen dataclass encodable (its class name is its tag)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass; only dataclasses cross actor boundaries")
    _CLASSES[cls.__name__] = cls
    _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return cls


for _module in (calls, control):
    for _name in dir(_module):
        _obj = getattr(_module, _name)
        if (
            isinstance(_obj, type)
            and dataclasses.is_dataclass(_obj)
            and _obj.__module__ == _module.__name__
        ):
            register(_obj)
# the dataclasses that travel inside a message's fields (see _nested)
register(kernel_ops.Layer)
register(kernel_ops.Spare)

NESTED = 1  # the msgpack extension type of a registered dataclass inside a field


class CodecError(ValueError):
    pass


_local = threading.local()


def _packer() -> msgpack.Packer:
    # msgpack.packb builds a Packer per call, and a Packer mallocs a 1 MiB buffer: one mmap
    # and munmap per message (measured with strace: ~20 per routed call, and 3x slower
    # sends). One reused Packer per thread avoids it.
    packer = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer(autoreset=True, default=_nested)
    return packer


def _nested(obj: object) -> msgpack.ExtType:
    """msgpack's hook for a value it cannot pack: a registered dataclass, as an extension
    (packed apart: the thread's Packer is busy with the message around it)."""
    names = _FIELDS.get(type(obj))
    if names is None:
        raise TypeError(f"can not serialize {type(obj).__name__!r} object")
    fields = [type(obj).__name__, *(getattr(obj, n) for n in names)]
    return msgpack.ExtType(NESTED, msgpack.packb(fields, default=_nested))


def _unnested(code: int, data: bytes) -> object:
    if code != NESTED:
        raise ValueError(f"unknown msgpack extension type {code}")
    tag, *fields = msgpack.unpackb(data, strict_map_key=False, ext_hook=_unnested)
    return _CLASSES[tag](*fields)


def encode(msg: object) -> bytes:  # (any value: a registered message class's, or CodecError)
    try:
        names = _FIELDS[type(msg)]
    except KeyError:
        raise CodecError(
            f"cannot encode {type(msg).__name__}: not a registered message class "
            f"(register it with tether.messages.codec.register)"
        ) from None
    try:
        return _packer().pack([type(msg).__name__, *(getattr(msg, n) for n in names)])
    except (TypeError, ValueError) as exc:
        raise CodecError(
            f"cannot encode {type(msg).__name__}: {exc} (fields must be msgpack-able)"
        ) from exc


def decode(data: bytes) -> DataclassInstance:
    """An instance of whichever registered class the data names (readers match its class)."""
    try:
        tag, *values = msgpack.unpackb(data, strict_map_key=False, ext_hook=_unnested)
        cls = _CLASSES[tag]
    except (KeyError, ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CodecError(f"cannot decode a message of {len(data)} bytes: {exc!r}") from exc
    msg: DataclassInstance = cls(*values)
    return msg


def decode_call(data: bytes) -> calls.Call:
    """A call a Route carries (tether.messages.control.Route.call: an encoded Call)."""
    msg = decode(data)
    if not isinstance(msg, calls.Call):
        raise CodecError(
            f"a routed message of {len(data)} bytes is a {type(msg).__name__}, not a Call"
        )
    return msg
