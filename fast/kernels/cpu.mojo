"""What the CPU the kernels are built for, and the one they run on, has: the
float32 lanes of a vector, bfloat16 dot products (AVX512_BF16), AMX's tiles,
and the widths of a decoded token's reads that follow from them.
"""

from std.ffi import external_call
from std.sys.info import CompilationTarget, simd_width_of, size_of
from std.sys._assembly import inlined_assembly


# float32 lanes in one vector register of the machine the kernels are built
# for (MAX builds them on it): 16 with AVX-512, 8 with AVX2, 4 with NEON.
comptime WIDTH = simd_width_of[DType.float32]()
# vdpbf16ps (AVX512_BF16): each float32 lane adds the products of a pair of
# bfloat16 lanes, so one instruction does 32 multiply-adds on 64 bytes of
# weights, where widening them to float32 first takes two loads, two
# conversions and two FMAs.
comptime HAS_BF16_DOT = CompilationTarget._has_feature["avx512bf16"]()
# MAX builds for the CPU its model number names, with that model's features,
# and a virtual machine's CPU can be named for an older model than it is,
# one without AVX512_BF16 or AMX: its kernels then lack them. So on any x86 CPU with
# AVX-512 (which every CPU with AVX512_BF16 or AMX has) the kernels also
# carry both as inline assembly, and cpuid says at run time whether the CPU
# runs them (cpu_has_bf16_dot, cpu_has_amx).
comptime HAS_AVX512F = CompilationTarget._has_feature["avx512f"]()
comptime CAN_ASK_CPU = HAS_AVX512F and CompilationTarget._has_feature["avx512vl"]()
comptime BF16_DOT_BUILT = HAS_BF16_DOT or CAN_ASK_CPU
comptime PAIRS = 32  # bfloat16 lanes one vdpbf16ps reads from each operand
# Bytes of weights one load takes in a decoded token's streams (at most a
# vector register's). A core that executes a 512-bit vector as two 256-bit
# halves (AMD's Zen 4) keeps more reads from memory in flight with 32-byte
# loads than with 64-byte ones, and a loop bound by memory has the load
# ports to spare for twice the loads on any x86 core (devtools/bench/
# TUNING_LOG.md). (vdpbf16ps on 256-bit registers needs AVX512VL, which
# every CPU with AVX512_BF16 has.)
comptime READ_BYTES = 32
comptime READ_PAIRS = READ_BYTES // 2  # the bfloat16 pairs of one such load
# A decoded token's weight rows are read in STREAMS equal parts at once: one
# core then has as many reads from memory in flight. Parts far apart are
# streams of their own to the hardware prefetcher, where neighbouring rows
# are one; eight read fastest of 1, 2, 4, 8 and 16 (devtools/bench/TUNING_LOG.md).
comptime STREAMS = 8


def cpuid_7_eax_1() -> UInt32:
    """eax of cpuid leaf 7, subleaf 1 (bit 5: AVX512_BF16)."""
    return inlined_assembly[
        "movl $$7, %eax; movl $$1, %ecx; cpuid", UInt32, constraints="={eax},~{ebx},~{ecx},~{edx}"
    ]()


def cpuid_7_edx_0() -> UInt32:
    """edx of cpuid leaf 7, subleaf 0 (bit 22: AMX-BF16, bit 24: AMX-TILE)."""
    return inlined_assembly[
        "movl $$7, %eax; xorl %ecx, %ecx; cpuid", UInt32, constraints="={edx},~{eax},~{ebx},~{ecx}"
    ]()


def cpu_has_bf16_dot() -> Bool:
    """Whether the kernels multiply bfloat16 weights as they are: built for
    a target with AVX512_BF16, or built with AVX-512 for one whose CPU,
    asked now, has it."""
    comptime if HAS_BF16_DOT:
        return True
    elif CAN_ASK_CPU:
        return (cpuid_7_eax_1() >> 5) & 1 == 1
    else:
        return False


comptime ARCH_REQ_XCOMP_PERM = 0x1023  # arch_prctl: ask for a state component
comptime XFEATURE_XTILEDATA = 18  # the AMX tiles' state
comptime SYS_ARCH_PRCTL = 158


def cpu_has_amx() -> Bool:
    """Whether this process may run AMX's bfloat16 tiles: the CPU has them
    (cpuid) and Linux gave this process their state, which it asks for here
    (once per process would do; again costs one system call). Without that,
    the first tile instruction kills the process."""
    comptime if CAN_ASK_CPU:
        var edx = cpuid_7_edx_0()
        if (edx >> 22) & 1 == 0 or (edx >> 24) & 1 == 0:
            return False
        var granted = external_call["syscall", Int](
            SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
        )
        return granted == 0
    else:
        return False


def read_lanes[dtype: DType]() -> Int:
    """Lanes of `dtype` one load of a decoded token's weight streams takes:
    READ_BYTES of them, at most a vector register's worth (WIDTH)."""
    return min(WIDTH, READ_BYTES // size_of[dtype]())
