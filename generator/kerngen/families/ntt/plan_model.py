"""A planned transform run without its C unit: the plan its manifest entry
records (`plan_unit.plan_manifest`), each sub-pass's calls made at once
through `run` (the machine model's, for an ISA the CPU lacks), with the
twiddle tables made again from the manifest alone by the rule the C unit
builds them with (`planned.twiddle_value`), as the strategy stores them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .planned import twiddle_value

Run = Callable[[str, dict[int, np.ndarray]], dict[int, np.ndarray]]


def tables(manifest: dict, fn: dict) -> tuple[list[int], list[int] | None]:
    """The driver's twiddle tables: w of every entry (and Shoup's w'), sub-pass after sub-pass."""
    params, plan = manifest["params"], fn["plan"]
    planned = next(f for f in manifest["functions"] if f["kind"] == "ntt_forward")["output"]["layout"]["planned"]
    q, n = params["q"], params["n"]
    negacyclic = planned["ring"] == "negacyclic"
    root_bits = n.bit_length() - 1 + (1 if negacyclic else 0)
    tw = plan["twiddles"]
    inverse = plan["direction"] == "inverse"
    w, wp = [], []
    for stage in plan["stages"]:
        for s in stage["subpasses"]:
            for row in range(s["rows"]):
                for k in range(s["entries"]):
                    if s["radix_bits"]:
                        t = (k + 1).bit_length() - 1
                        layer, block = s["first"] + t, (row << t) + k + 1 - (1 << t)
                    else:
                        local, block = plan["leaf_entries"][k]
                        layer, block = s["first"] + local, block + (row << local)
                    v = twiddle_value(q, n, root_bits, planned["root"], negacyclic, planned["coset"], layer, block,
                                      inverse)
                    if layer == s["scale_layer"]:
                        v = v * tw["scale"] % q
                    if tw["form"] == "montgomery":
                        v = v * (1 << params["width"]) % q
                        w.append(v - q if v > q // 2 else v)
                    else:
                        w.append(v)
                        if tw["form"] == "shoup":
                            wp.append((v << tw["companion_bits"]) // q)
    return w, (wp if tw["form"] == "shoup" else None)


def drive(manifest: dict, fn: dict, run: Run, inputs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """The driver `fn` (a manifest entry) on each row of `inputs` (argument -> rows of unsigned words, the
    in/inout ones): every call of a sub-pass, of every row, gathered into one batch of `run`."""
    plan = fn["plan"]
    codelets = {f["symbol"]: f for f in manifest["functions"]}
    names = [a["name"] for a in fn["args"]]
    rows = len(next(iter(inputs.values())))
    words = np.dtype(f"<u{next(iter(inputs.values())).dtype.itemsize}")
    arrays = [np.array(inputs[i], dtype=words) if i in inputs else np.zeros((rows, a["count"]), dtype=words)
              for i, a in enumerate(fn["args"])]
    top = 1 << (8 * words.itemsize)
    w, wp = ((None if t is None else (np.array(t, dtype=object) % top).astype(words)) for t in tables(manifest, fn))
    table = 0
    for stage in plan["stages"]:
        for s in stage["subpasses"]:
            codelet = codelets[s["codelet"]]
            span = codelet["args"][0]["count"]
            tile, k = np.divmod(np.arange(stage["tiles"] * s["calls"]), s["calls"])
            block, low = np.divmod(tile, stage["low_groups"])
            at = (block * stage["block_elements"] + low * stage["low_elements"]
                  + (k // s["spread"]) * s["block_elements"] + (k % s["spread"]) * s["offset_elements"])
            row = block * s["tile_blocks"] + k // s["spread"]
            # the elements each call takes (a Rows codelet's rows: its span's gaps belong to other calls)
            taken = (np.arange(span) if not s["stride"] else
                     (np.arange(1 << s["radix_bits"])[:, None] * s["stride"] + np.arange(s["width"])).reshape(-1))
            window = at[:, None] + taken[None, :]
            batch = {}
            for j, name in enumerate(s["arrays"]):
                part = np.zeros((rows, len(at), span), dtype=words)
                part[:, :, taken] = arrays[names.index(name)][:, window]
                batch[j] = part.reshape(-1, span)
            if s["entries"]:
                rows_of = table + row[:, None] * s["entries"] + np.arange(s["entries"])[None, :]
                extra = [w] + ([wp] if wp is not None else [])
                for j, t in enumerate(extra, start=len(s["arrays"])):
                    batch[j] = np.broadcast_to(t[rows_of], (rows,) + rows_of.shape).reshape(-1, s["entries"])
            out = run(s["codelet"], batch)
            for j, name in enumerate(s["arrays"]):
                if codelet["args"][j]["role"] != "in":
                    arrays[names.index(name)][:, window] = out[j].reshape(rows, len(at), span)[:, :, taken]
            table += s["rows"] * s["entries"]
    return {i: arrays[i] for i in range(len(arrays))}
