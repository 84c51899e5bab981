"""Decode and encode a 100k-event mixed log: typed msgspec vs msgspec→dict vs pydantic v2.

The pydantic models are generated from the same msgspec types (field for field, the same
tagged unions), so both sides validate the same schema.

    python bench/bench_codec.py [--events N] [--rounds R]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import msgspec
import msgspec.inspect as mi
import pydantic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ratio import best_of, ratio_line

import universal_event as ue

_models: dict[type, Any] = {}


def _pydantic_type(info: mi.Type) -> Any:
    match info:
        case mi.AnyType():
            return Any
        case mi.NoneType():
            return type(None)
        case mi.BoolType():
            return bool
        case mi.IntType():
            return int
        case mi.FloatType():
            return float
        case mi.StrType():
            return str
        case mi.LiteralType():
            return Literal[tuple(info.values)]
        case mi.ListType():
            return list[_pydantic_type(info.item_type)]  # type: ignore[misc]
        case mi.DictType():
            return dict[str, _pydantic_type(info.value_type)]  # type: ignore[misc]
        case mi.UnionType():
            members = tuple(_pydantic_type(t) for t in info.types)
            structs = [t for t in info.types if isinstance(t, mi.StructType)]
            union = Union[members]  # noqa: UP007
            if len(structs) > 1 and structs[0].tag_field:
                return Annotated[union, pydantic.Field(discriminator=structs[0].tag_field)]
            return union
        case mi.StructType():
            return _model(info)
    raise TypeError(info)


def _model(info: mi.StructType) -> Any:
    if info.cls in _models:
        return _models[info.cls]
    fields: dict[str, Any] = {}
    if info.tag_field:
        fields[info.tag_field] = (Literal[info.tag], info.tag)
    for field in info.fields:
        annotation = _pydantic_type(field.type)
        default = (
            ...
            if field.required
            else (field.default if field.default is not mi.NODEFAULT else field.default_factory())
        )
        fields[field.name] = (annotation, default)
    model = pydantic.create_model(info.cls.__name__ + "Model", **fields)
    _models[info.cls] = model
    return model


def mixed_log(count: int) -> list[ue.EventBase]:
    source = ue.Source(runtime="anthropic", native_type="content_block_delta", model="claude")
    provenance = ue.Provenance(provider="anthropic", api="messages", model="claude")
    events: list[ue.EventBase] = []
    seq = 0
    while len(events) < count:
        turn = f"turn-{seq}"
        batch: list[ue.EventBase] = [
            ue.TurnStartEvent(turn_id=turn),
            ue.UserMessageEvent(
                turn_id=turn, content=[ue.TextPart(text="List the files, please.")]
            ),
            *[
                ue.AssistantChunkEvent(turn_id=turn, message_id="msg_1", index=0, delta="Sure, ")
                for _ in range(4)
            ],
            ue.AssistantMessageEvent(
                turn_id=turn,
                message_id="msg_1",
                provenance=provenance,
                content=[
                    ue.ThinkingPart(
                        text="I should run ls.", signature="sig" * 20, provenance=provenance
                    ),
                    ue.TextPart(text="Sure, let me look."),
                    ue.ToolCallPart(id="toolu_1", name="Bash", arguments={"command": "ls -la"}),
                ],
            ),
            ue.ToolCallEvent(
                turn_id=turn, call_id="toolu_1", name="Bash", arguments={"command": "ls -la"}
            ),
            ue.ToolResultEvent(
                turn_id=turn,
                call_id="toolu_1",
                content=[ue.TextPart(text="README.md\nsetup.py\n" * 10)],
            ),
            ue.UsageEvent(turn_id=turn, usage=ue.Usage(input_tokens=1200, output_tokens=80)),
            ue.TurnEndEvent(turn_id=turn, usage=ue.Usage(input_tokens=1200, output_tokens=80)),
        ]
        for event in batch:
            events.append(
                msgspec.structs.replace(
                    event, seq=seq, id=f"ev-{seq}", session_id="s1", ts=1.7e9 + seq, source=source
                )
            )
            seq += 1
    return events[:count]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    events = mixed_log(args.events)
    data = ue.encode_lines(events)
    lines = data.splitlines()
    array = b"[" + b",".join(lines) + b"]"

    typed_decoder = msgspec.json.Decoder(list[ue.Event])
    dict_decoder = msgspec.json.Decoder()
    encoder = msgspec.json.Encoder()
    pydantic_adapter = pydantic.TypeAdapter(
        list[
            Annotated[_pydantic_type(mi.type_info(ue.Event)), pydantic.Field(discriminator="type")]
        ]
    )
    typed = typed_decoder.decode(array)
    models = pydantic_adapter.validate_json(array)
    assert len(typed) == len(models) == args.events

    typed_decode, dict_decode, pydantic_decode = best_of(
        args.rounds,
        lambda: typed_decoder.decode(array),
        lambda: dict_decoder.decode(array),
        lambda: pydantic_adapter.validate_json(array),
    )
    typed_encode, pydantic_encode = best_of(
        args.rounds, lambda: encoder.encode(typed), lambda: pydantic_adapter.dump_json(models)
    )
    (lines_decode,) = best_of(args.rounds, lambda: ue.decode_lines(data))

    size = len(array) / 1e6
    print(f"log: {args.events} events, {size:.1f} MB; ue.decode_lines {lines_decode * 1e3:.1f} ms")
    print(
        ratio_line(
            "codec.decode_vs_msgspec_dict", typed_decode * 1e3, dict_decode * 1e3, "ms", ">=", 1.0
        )
    )
    print(
        ratio_line(
            "codec.decode_vs_pydantic", typed_decode * 1e3, pydantic_decode * 1e3, "ms", ">=", 5.0
        )
    )
    print(
        ratio_line(
            "codec.encode_vs_pydantic", typed_encode * 1e3, pydantic_encode * 1e3, "ms", ">=", 5.0
        )
    )


if __name__ == "__main__":
    main()
