"""Scala 2.12's hashCode of a schema-ddl Field (MurmurHash3), for the recovered columns' names."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from jobs.iglu.parquet.ddl_types import _Decimal, _Field, _Primitive, _Struct, _Type

_M32 = 0xFFFFFFFF


def _rotl(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & _M32


def _mix_last(hash_: int, data: int) -> int:
    k = _rotl((data * 0xCC9E2D51) & _M32, 15)
    return (hash_ ^ ((k * 0x1B873593) & _M32)) & _M32


def _mix(hash_: int, data: int) -> int:
    return (_rotl(_mix_last(hash_, data), 13) * 5 + 0xE6546B64) & _M32


def _finalize(hash_: int, length: int) -> int:
    h = (hash_ ^ length) & _M32
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & _M32
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _java_string_hash(text: str) -> int:
    encoded = text.encode("utf-16-be")
    return reduce(
        lambda h, i: (31 * h + int.from_bytes(encoded[i : i + 2], "big")) & _M32, range(0, len(encoded), 2), 0
    )


def _product_hash(elements: Sequence[int]) -> int:
    return _finalize(reduce(_mix, elements, 0xCAFEBABE), len(elements))


_SEQ_SEED, _SET_SEED = _java_string_hash("Seq"), _java_string_hash("Set")


def _set_hash(elements: Sequence[int]) -> int:
    total, xor, product = 0, 0, 1
    for element in elements:
        total, xor = (total + element) & _M32, xor ^ element
        product = (product * element) & _M32 if element else product
    return _finalize(_mix_last(_mix(_mix(_SET_SEED, total), xor), product), len(elements))


def _nullability_hash(nullable: bool) -> int:
    return _java_string_hash("Nullable" if nullable else "Required")


def _type_hash(value: _Type) -> int:
    if isinstance(value, _Primitive):  # a case object: the hash of its name
        return _java_string_hash(value.name)
    if isinstance(value, _Decimal):
        return _product_hash([_java_string_hash(f"Digits{value.precision}"), value.scale])
    if isinstance(value, _Struct):  # NonEmptyVector is a value class: its Vector's seqHash
        fields = [_field_hash(field) for field in value.fields]
        return _product_hash([_finalize(reduce(_mix, fields, _SEQ_SEED), len(fields))])
    return _product_hash([_type_hash(value.element), _nullability_hash(value.nullable)])


def _field_hash(field: _Field) -> int:
    accessors = _set_hash([_java_string_hash(accessor) for accessor in dict.fromkeys(field.accessors)])
    return _product_hash(
        [_java_string_hash(field.name), _type_hash(field.type), _nullability_hash(field.nullable), accessors]
    )


def _scala_hash(field: _Field) -> int:
    """`scala.math.abs(field.hashCode)`: as a signed 32-bit int, Int.MinValue staying negative."""
    unsigned = _field_hash(field)
    signed = unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned
    return signed if signed == -(2**31) else abs(signed)
