"""A prompt's keys and values written into the caches in place, straight from
c_attn's output.
"""

from std.sys.info import num_physical_cores
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor
from extensibility.managed_tensor_slice import _MutableInputTensor as MutableInputTensor
from .cpu import WIDTH


@always_inline
def cast_values[
    dtype: DType
](source: UnsafePointer[Float32, _], dest: UnsafePointer[mut=True, Scalar[dtype], _], count: Int):
    """dest[0:count] = source[0:count] in dest's dtype."""
    var whole = count - count % WIDTH
    for i in range(0, whole, WIDTH):
        (dest + i).store((source + i).load[width=WIDTH]().cast[dtype]())
    for i in range(whole, count):
        dest[i] = source[i].cast[dtype]()


@extensibility.register("gpt2_cache_write")
struct CacheWrite:
    """Writes a prompt's keys and values, straight from c_attn's output qkv
    [batch, seq, 3 * embed] (queries, keys, values, each heads by head_dim),
    into one layer's slots of the caches [layers, batch, heads, context,
    head_dim], at positions start .. start + seq, rounded to the caches'
    dtype. Each core takes its share of the positions, each position's
    row read once in order, rather than the keys and values split into
    heads by MAX's operations first and then written one value at a time
    by one core."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        key_cache: MutableInputTensor[rank=5, ...],
        value_cache: MutableInputTensor[rank=5, ...],
        qkv: InputTensor[dtype = DType.float32, rank=3, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        layer_index: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        var layer = Int(layer_index.unsafe_ptr()[0])
        var batch, seq = qkv.dim_size(0), qkv.dim_size(1)
        var heads, context, head_dim = (
            key_cache.dim_size(2),
            key_cache.dim_size(3),
            key_cache.dim_size(4),
        )
        var embed = heads * head_dim
        if qkv.dim_size(2) != 3 * embed or qkv.strides()[2] != 1:
            raise Error("gpt2_cache_write: qkv must be [batch, seq, 3 * heads * head_dim]")
        var first = Int(start.unsafe_ptr()[0])
        if first < 0 or first + seq > context:
            raise Error("gpt2_cache_write: positions beyond the cache")
        var key_ptr, value_ptr = key_cache.unsafe_ptr(), value_cache.unsafe_ptr()
        var qkv_ptr = qkv.unsafe_ptr()
        var qkv_strides = qkv.strides()
        var workers = num_physical_cores()

        def write_share(index: Int) {var}:
            for row in range(index, batch * seq, workers):
                var b, s = row // seq, row % seq
                var keys = qkv_ptr + b * qkv_strides[0] + s * qkv_strides[1] + embed
                for h in range(heads):
                    var slot = (((layer * batch + b) * heads + h) * context + first + s) * head_dim
                    cast_values(keys + h * head_dim, key_ptr + slot, head_dim)
                    cast_values(keys + embed + h * head_dim, value_ptr + slot, head_dim)

        parallelize(write_share, workers)
