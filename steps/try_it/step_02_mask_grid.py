"""Step 02, try it: what the mask looks like, and what it does to a softmax.

Prints causal_mask(4, 2) (4 new tokens after 2 cached ones) as a grid, then
adds it to a row of equal scores and applies the softmax: the -inf entries
become weights of exactly 0, the others share the weight equally.
"""

import numpy as np
from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask


def show(mask: np.ndarray, num_tokens: int) -> None:
    rows, columns = mask.shape
    header = [f"c{j}" if j < num_tokens else f"n{j - num_tokens}" for j in range(columns)]
    print("         " + " ".join(f"{h:>4}" for h in header))
    for i in range(rows):
        cells = " ".join(f"{'-inf' if np.isinf(v) else '0':>4}" for v in mask[i])
        print(f"row {i} @{num_tokens + i} {cells}")


def main() -> None:
    num_tokens, sequence_length = 2, 4
    mask = causal_mask(sequence_length, num_tokens, dtype=DType.float32, device=CPU())
    grid = np.asarray(mask.to_numpy())
    print(f"causal_mask({sequence_length}, {num_tokens}): shape {list(grid.shape)}")
    print("(c = cached token, n = new token; @ = the row's absolute position)")
    show(grid, num_tokens)

    scores = Tensor.zeros(list(grid.shape), dtype=DType.float32)  # equal scores
    weights = np.asarray(F.softmax(scores + mask, axis=-1).to_numpy())
    print("\nsoftmax(0 + mask) per row: the weights each new token gives every column")
    for i, row in enumerate(weights):
        print(f"row {i}  " + " ".join(f"{w:5.3f}" for w in row) + f"   sum {row.sum():.3f}")

    half = causal_mask(3, 0, dtype=DType.float16, device=CPU())
    print(
        f"\ncausal_mask(3, 0, dtype=float16) has dtype {half.dtype} and shape {[int(d) for d in half.shape]}"
    )


if __name__ == "__main__":
    main()
