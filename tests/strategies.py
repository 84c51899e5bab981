"""Hypothesis strategies for every Universal Event type, built from the msgspec types.

Walking ``msgspec.inspect`` keeps the strategies in step with the schema: a new event
type or field is generated without touching this file.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

from universal_event import EVENT_TYPES, EventBase

_text = st.text(max_size=20)
_json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text
_json_value = st.recursive(
    _json_scalar,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=8,
)
_cache: dict[Any, st.SearchStrategy[Any]] = {}


def _for_type(info: mi.Type) -> st.SearchStrategy[Any]:
    match info:
        case mi.AnyType():
            return _json_value
        case mi.NoneType():
            return st.none()
        case mi.BoolType():
            return st.booleans()
        case mi.IntType():
            return st.integers(-(2**31), 2**31)
        case mi.FloatType():
            return st.floats(allow_nan=False, allow_infinity=False, width=64)
        case mi.StrType():
            return st.text(max_size=30)
        case mi.LiteralType():
            return st.sampled_from(info.values)
        case mi.ListType():
            return st.lists(_for_type(info.item_type), max_size=3)
        case mi.DictType():
            return st.dictionaries(st.text(max_size=8), _for_type(info.value_type), max_size=3)
        case mi.UnionType():
            return st.one_of([_for_type(t) for t in info.types])
        case mi.StructType():
            return _for_struct(info)
        case _:
            raise TypeError(f"no strategy for {info!r}")


def _for_struct(info: mi.StructType) -> st.SearchStrategy[Any]:
    if info.cls in _cache:
        return _cache[info.cls]
    required = {f.name: _for_type(f.type) for f in info.fields if f.required}
    optional = {f.name: _for_type(f.type) for f in info.fields if not f.required}
    strategy = st.fixed_dictionaries(required, optional=optional).map(lambda kw: info.cls(**kw))
    _cache[info.cls] = st.deferred(lambda: strategy)
    return strategy


def events(event_type: type[EventBase] | None = None) -> st.SearchStrategy[Any]:
    """Any event, or events of one type."""
    if event_type is not None:
        return _for_type(mi.type_info(event_type))
    return st.one_of([_for_type(mi.type_info(cls)) for cls in EVENT_TYPES.values()])


def as_builtins(event: EventBase) -> Any:
    return msgspec.to_builtins(event)
