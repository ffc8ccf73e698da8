"""The call of a PyTorch op that fuseopt keeps opaque (`nn.torch_call`, `tile.torch_call`).

An ATen op without an nn lowering is kept in the IR as a call: its target
(`aten.flip.default`) and its arguments as JSON text, where each tensor argument is
a reference to an operand of the op, so that the textual IR names everything the op
needs and every stage can run it again. The text is JSON written with single quotes
(so that it reads well inside an MLIR string attribute, where double quotes print as
escapes; a string argument holding a quote cannot be written):

    {'args':[{'operand':0},{'operand':1},-1,false],'kwargs':{}}

Values: JSON numbers, booleans, strings, null and lists; `{"operand": i}` (the i-th
tensor operand); `{"dtype": "float32"}`, `{"layout": "strided"}`,
`{"memory_format": "contiguous_format"}`; `{"device": null}` (the device the call runs
on: its operands', else the compiled function's); `{"float": "inf"}` (and "-inf",
"nan"). This module is the one reader and writer of that text: the frontend encodes,
the verifiers check (`check`: only names and literals, since the text becomes source),
both backends' printed host functions call it (`python_call`) and both interpreters
run it (`invoke`). torch is imported only where a call runs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

TARGET = re.compile(r"aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+")
"""What a target looks like: `aten.<op>.<overload>`."""

SPECIAL_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class CallEncodingError(ValueError):
    """An argument that cannot be written as a call (a Python object of another kind)."""


def encode(
    args: Sequence[Any], kwargs: dict[str, Any], operand: Callable[[Any], int | None]
) -> str:
    """The call text of `args`/`kwargs`; `operand(value)` gives a tensor argument's
    operand index (None: not a tensor operand). Raises CallEncodingError."""

    def value(v: Any) -> Any:
        index = operand(v)
        if index is not None:
            return {"operand": index}
        if v is None or isinstance(v, bool | int | str):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": "nan" if math.isnan(v) else repr(v)}
        if isinstance(v, list | tuple):
            return [value(x) for x in v]
        kind = type(v).__name__
        if kind == "dtype":
            return {"dtype": str(v).removeprefix("torch.")}
        if kind == "device":
            return {"device": None}
        if kind == "layout":
            return {"layout": str(v).removeprefix("torch.")}
        if kind == "memory_format":
            return {"memory_format": str(v).removeprefix("torch.")}
        raise CallEncodingError(f"an argument of type {kind} ({v!r}) cannot be written")

    body = {"args": [value(a) for a in args], "kwargs": {k: value(v) for k, v in kwargs.items()}}
    text = json.dumps(body, separators=(",", ":"))
    if "'" in text:
        raise CallEncodingError("a string argument holding a quote cannot be written")
    return text.replace('"', "'")


def decode(call: str) -> tuple[list[Any], dict[str, Any]]:
    """The args and kwargs of `call` as JSON values (references left as dicts).
    Raises ValueError for text that is not a call."""
    if '"' in call:
        raise ValueError("the call is written with single quotes, not double quotes")
    try:
        body = json.loads(call.replace("'", '"'))
    except json.JSONDecodeError as e:
        raise ValueError(f"the call is not JSON: {e}") from None
    if not isinstance(body, dict) or set(body) != {"args", "kwargs"}:
        raise ValueError('the call must be {"args": [...], "kwargs": {...}}')
    if not isinstance(body["args"], list) or not isinstance(body["kwargs"], dict):
        raise ValueError("args must be a list and kwargs an object")
    return body["args"], body["kwargs"]


def operand_references(call: str) -> list[int]:
    """The operand indices `call` refers to, in order of appearance."""
    found: list[int] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "operand" in v:
                found.append(v["operand"])
            return
        if isinstance(v, list):
            for x in v:
                walk(x)

    args, kwargs = decode(call)
    walk(args)
    walk(list(kwargs.values()))
    return found


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a keyword argument's name and a dtype, layout or memory format name look like."""

TORCH_NAMES = ("dtype", "layout", "memory_format")
"""The references whose value names a `torch` attribute."""


def _check_value(v: Any) -> None:
    """Raise ValueError for a value of the call that is not one of the module doc's."""
    if isinstance(v, list):
        for x in v:
            _check_value(x)
    elif isinstance(v, dict):
        if len(v) != 1:
            raise ValueError(f"a reference holds one key, got {sorted(v)}")
        ((key, x),) = v.items()
        if key == "operand":
            ok = isinstance(x, int) and not isinstance(x, bool)
        elif key == "device":
            ok = x is None
        elif key == "float":
            ok = x in SPECIAL_FLOATS
        elif key in TORCH_NAMES:
            ok = isinstance(x, str) and IDENTIFIER.fullmatch(x) is not None
        else:
            raise ValueError(f"unknown reference {key!r} in the call")
        if not ok:
            raise ValueError(f"{{{key!r}: {x!r}}} is not a valid {key} in the call")
    elif not (v is None or isinstance(v, bool | int | float | str)):
        raise ValueError(f"a value of type {type(v).__name__} in the call")


def check(target: str, call: str, operands: int) -> None:
    """Raise ValueError unless `target` names an aten op, every value of `call` is one
    the module doc lists (keyword names and torch names identifiers, special floats
    from SPECIAL_FLOATS: the printers write them into Python source), and `call` uses
    each of the `operands` operands (and no other)."""
    if not TARGET.fullmatch(target):
        raise ValueError(f"target {target!r} must name an ATen op: aten.<op>.<overload>")
    args, kwargs = decode(call)
    bad = [k for k in kwargs if not IDENTIFIER.fullmatch(k)]
    if bad:
        raise ValueError(f"keyword argument names must be identifiers, got {bad[0]!r}")
    _check_value(args)
    _check_value(list(kwargs.values()))
    refs = operand_references(call)
    if sorted(set(refs)) != list(range(operands)):
        raise ValueError(f"the call refers to operands {sorted(set(refs))}, the op has {operands}")


def _python(v: Any, names: Sequence[str], device: str) -> str:
    if isinstance(v, dict):
        (key, x), *_ = v.items()
        if key == "operand":
            return names[x]
        if key == "device":
            return device
        if key == "float":
            return f"float({x!r})"
        return f"getattr(torch, {x!r})"
    if isinstance(v, list):
        return "[" + ", ".join(_python(x, names, device) for x in v) + "]"
    return repr(v)


def python_call(target: str, call: str, names: Sequence[str], device: str) -> str:
    """`call` as a Python expression calling `torch.ops.<target>`: operand i is the
    expression `names[i]`, the device the expression `device`. The call is checked
    first (`check`): no text reaches the source unless it is a name or a literal."""
    check(target, call, len(names))
    args, kwargs = decode(call)
    parts = [_python(a, names, device) for a in args]
    parts += [f"{k}={_python(v, names, device)}" for k, v in kwargs.items()]
    return f"torch.ops.{target}({', '.join(parts)})"


def invoke(target: str, call: str, operands: Sequence[Any], device: Any = None) -> tuple[Any, ...]:
    """Run the call on tensors `operands` (on `device` when none of them says one);
    return its results as a tuple."""
    import torch

    here = next((t.device for t in operands), device if device is not None else "cpu")

    def value(v: Any) -> Any:
        if isinstance(v, dict):
            (key, x), *_ = v.items()
            if key == "operand":
                return operands[x]
            if key == "device":
                return here
            if key == "float":
                return SPECIAL_FLOATS[x]
            return getattr(torch, x)
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    args, kwargs = decode(call)
    op = torch.ops.aten
    _, name, overload = target.split(".")
    fn = getattr(getattr(op, name), overload)
    result = fn(*[value(a) for a in args], **{k: value(v) for k, v in kwargs.items()})
    return tuple(result) if isinstance(result, tuple | list) else (result,)
