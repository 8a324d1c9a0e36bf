"""A planned function run without its C unit: the plan its manifest entry
records (`plan_unit.plan_manifest`), each sub-pass's calls made at once
through `run` (the machine model's, for an ISA the CPU lacks), with the
twiddle tables made again from the manifest alone by the rule the C unit
builds them with (`planned.twiddle_value`, `planned.spread_factor`), as the
strategy stores them.

Stages run as the C driver runs them: a permutation moves rows; every other
stage fills its tiles (from another argument, or block 0 of its first
layer), gathers them into a buffer where it is buffered, makes its
sub-passes' calls (the calls of a sub-pass, of every tile and row of the
inputs, in one batch: a stage's tiles are independent, and a Spread's rows
are read before any row it writes is another call's source) and scatters a
buffer back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .planned import spread_factor, twiddle_value

Run = Callable[[str, dict[int, np.ndarray]], dict[int, np.ndarray]]


def _twiddle(math: dict, q: int, layer: int, block: int, inverse: bool) -> int:
    return twiddle_value(q, math["n"], math["root_bits"], math["psi"], bool(math["negacyclic"]), math["coset"],
                         layer, block, inverse)


def _entry(plan: dict, s: dict, q: int, row: int, k: int) -> tuple[int, int]:
    """Entry k of table row `row` of sub-pass `s`: its value, and the layer it belongs to (-1: none)."""
    maths = plan["maths"]
    if s["expansion"]:
        e = s["expansion"]
        shift, math = maths[e["shift"]], maths[e["math"]]
        v = spread_factor(q, shift["psi"], e["n_inverse"], e["row_bits"], e["bits"], row, k,
                          lambda layer, block: _twiddle(math, q, layer, block, False))
        return v, -1
    if s["radix_bits"]:
        t = (k + 1).bit_length() - 1
        layer, block = s["first"] + t, (row << t) + k + 1 - (1 << t)
    else:
        local, block = plan["leaves"][s["leaf"]][k]
        layer, block = s["first"] + local, block + (row << local)
    return _twiddle(maths[s["math"]], q, layer, block, bool(s["inverse"])), layer


def tables(manifest: dict, fn: dict) -> tuple[list[int], list[int] | None]:
    """The driver's twiddle tables: w of every entry (and Shoup's w'), sub-pass after sub-pass."""
    q, width = manifest["params"]["q"], manifest["params"]["width"]
    plan = fn["plan"]
    tw = plan["twiddles"]
    w, wp = [], []
    for stage in plan["stages"]:
        for s in stage["subpasses"]:
            for row in range(s["rows"]):
                for k in range(s["entries"]):
                    v, layer = _entry(plan, s, q, row, k)
                    if layer == s["scale_layer"]:
                        v = v * s["scale"] % q
                    if tw["form"] == "montgomery":
                        v = v * (1 << width) % q
                        w.append(v - q if v > q // 2 else v)
                    else:
                        w.append(v)
                        if tw["form"] == "shoup":
                            wp.append((v << tw["companion_bits"]) // q)
    return w, (wp if tw["form"] == "shoup" else None)


def _permute(m: dict, target: np.ndarray, source: np.ndarray) -> None:
    """Row i of `source` to row brv(i) of `target` (each of `m["row"]` elements), every input row at once."""
    bits, count = m["bits"], 1 << m["bits"]
    brv = np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(count)])
    width = count * m["row"]
    rows = source[:, :width].reshape(len(source), count, m["row"]).copy()
    target[:, :width] = rows[:, np.argsort(brv)].reshape(len(source), width)


def _tile_bases(st: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per tile of stage `st`: its block at the stage's first layer, and where its first row starts."""
    tile = np.arange(st["tiles"]) + st["tile_base"]
    block, low = np.divmod(tile, st["low_groups"])
    return block, st["origin"] + block * st["block_elements"] + low * st["low_elements"]


def _rows_of(st: dict, bases: np.ndarray) -> np.ndarray:
    """The elements of each tile's rows (`extent`), tile by tile, from their bases."""
    e = st["extent"]
    return (bases[:, None, None] + np.arange(e["rows"])[None, :, None] * e["apart"]
            + np.arange(e["width"])[None, None, :]).reshape(len(bases), -1)


def _taken(s: dict, span: int) -> np.ndarray:
    """The elements of its span a call takes: a Rows codelet's rows (its gaps belong to other calls)."""
    if not s["stride"]:
        return np.arange(span)
    rows = s["repeat"] << s["radix_bits"]
    return (np.arange(rows)[:, None] * s["stride"] + np.arange(s["width"])[None, :]).reshape(-1)


def _stage(st: dict, arrays: dict[str, np.ndarray], args: list[str], codelets: dict, run: Run,
           table: tuple[np.ndarray, np.ndarray | None]) -> None:
    """One stage on `arrays` (argument name -> rows of unsigned words)."""
    first = args[0]
    block, bases = _tile_bases(st)
    if st["fill"]:
        f = st["fill"]
        start = bases - f["origin"] - (block * st["block_elements"] if f["from_block_zero"] else 0)
        arrays[first][:, _rows_of(st, bases)] = arrays[f["source"]][:, _rows_of(st, start)]
    if st["buffered"]:
        home = _rows_of(st, bases)
        work = {first: arrays[first][:, home].reshape(len(arrays[first]), -1)}
        origins = np.arange(st["tiles"]) * home.shape[1]  # each tile's buffer, adjacent rows, end to end
    else:
        work, origins = {}, bases
    w, wp = table
    rows_in = len(arrays[first])
    for s in st["subpasses"]:
        codelet = codelets[s["codelet"]]
        span = codelet["args"][0]["count"]
        tile, k = np.divmod(np.arange(st["tiles"] * s["calls"]), s["calls"])
        at = origins[tile] + (k // s["spread"]) * s["block_elements"] + (k % s["spread"]) * s["offset_elements"]
        row = block[tile] * s["tile_blocks"] + k // s["spread"] * s["repeat"]
        taken = _taken(s, span)
        window = at[:, None] + taken[None, :]
        parts = [work[first] if st["buffered"] else arrays[s["arrays"][0]]] + [arrays[a] for a in s["arrays"][1:]]
        batch = {}
        for j, data in enumerate(parts):
            part = np.zeros((rows_in, len(at), span), dtype=data.dtype)
            part[:, :, taken] = data[:, window]
            batch[j] = part.reshape(-1, span)
        j = len(parts)
        if s["entries"]:
            entries = codelet["args"][j]["count"]
            index = s["table"] + row[:, None] * s["entries"] + np.arange(entries)[None, :]
            for t in [w] + ([wp] if wp is not None else []):
                batch[j] = np.broadcast_to(t[index], (rows_in,) + index.shape).reshape(-1, entries)
                j += 1
        if s["source"]:
            src = s["source"]["origin"] + row[:, None] * s["source"]["pitch"] + np.arange(codelet["args"][j]["count"])
            batch[j] = arrays[s["arrays"][0]][:, src].reshape(len(at) * rows_in, -1)
        out = run(s["codelet"], batch)
        for j, data in enumerate(parts):
            if codelet["args"][j]["role"] != "in":
                data[:, window] = out[j].reshape(rows_in, len(at), span)[:, :, taken]
    if st["buffered"]:
        arrays[first][:, home] = work[first].reshape(rows_in, *home.shape)


def drive(manifest: dict, fn: dict, run: Run, inputs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """The driver `fn` (a manifest entry) on each row of `inputs` (argument -> rows of unsigned words, the
    in/inout ones): every call of a sub-pass, of every row, gathered into one batch of `run`."""
    plan = fn["plan"]
    codelets = {f["symbol"]: f for f in manifest["functions"]}
    names = [a["name"] for a in fn["args"]]
    rows = len(next(iter(inputs.values())))
    words = np.dtype(f"<u{next(iter(inputs.values())).dtype.itemsize}")
    arrays = {name: np.array(inputs[i], dtype=words) if i in inputs else np.zeros((rows, a["count"]), dtype=words)
              for i, (name, a) in enumerate(zip(names, fn["args"]))}
    top = 1 << (8 * words.itemsize)
    w, wp = ((None if t is None else (np.array(t, dtype=object) % top).astype(words)) for t in tables(manifest, fn))
    for st in plan["stages"]:
        permute = next((s for s in st["subpasses"] if s["permute"]), None)
        if permute is not None:
            m = permute["permute"]
            target = arrays[permute["arrays"][0]]
            _permute(m, target, arrays[permute["arrays"][1]] if m["out_of_place"] else target)
        else:
            _stage(st, arrays, names, codelets, run, (w, wp))
    return {i: arrays[name] for i, name in enumerate(names)}
