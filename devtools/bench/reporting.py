"""Reporting, from the JSON data only (so that --render redraws them from a
saved run): the book's Markdown table with the ratios and the ceiling, the
profile of the decode graphs, and the plot; each device and dtype keeps
files of its own in docs/src/bench/."""

from __future__ import annotations

import json
from pathlib import Path

from devtools.bench.probe import READERS
from devtools.bench.profile import BURST, WARM_CALLS
from devtools.bench.stats import format_percent, format_spread


def load_line(load: dict) -> str:
    """How busy the machine was while a benchmark measured (machine.LoadMonitor)."""
    other = load["other_processes_cpu_fraction"]
    return (
        f"Load while measuring: load average {load['loadavg_before'][0]:.2f} before, "
        f"{load['loadavg_after'][0]:.2f} after"
        + (f", other processes used {other:.0%} of the CPU" if other is not None else "")
        + (" (**busy machine: figures are noisy**)" if load.get("busy") else "")
        + "."
    )


def publish(report: str, data: dict, out: Path | None) -> None:
    """Print a benchmark's table; with `out`, also write it there and its data beside it."""
    print(report)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report)
        out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")


def format_report(data: dict) -> str:
    """The Markdown the book includes: machine, load, table, ratios, ceiling."""
    lengths = data["lengths"]
    lines = [
        f"Machine: {data['machine']}. Device: {data['device']}, weights in {data['dtype']}, "
        f"batch {data['batch']}, {data['prompt_length']}-token prompt, greedy; "
        f"{data['repeats']} interleaved rounds after a warm-up.",
        "",
        load_line(data["load"]),
        "",
        "| model | "
        + " | ".join(f"{n} tokens" for n in lengths)
        + f" | first token | prefill ({data['prefill_length']} tokens) | compile |",
        "|---" * (len(lengths) + 4) + "|",
    ]
    for contender in data["contenders"].values():
        cells = [
            format_spread(contender["tokens_per_s"][str(n)], " tok/s", 1)
            if str(n) in contender["tokens_per_s"]
            else "not run"
            for n in lengths
        ]
        first = contender["first_token_s"]
        compile_s = contender["compile_s"]
        lines.append(
            f"| {contender['name']} | "
            + " | ".join(cells)
            + f" | {first['median'] * 1000:.0f} ms ({first['min'] * 1000:.0f}-{first['max'] * 1000:.0f})"
            + f" | {format_spread(contender['prefill_tokens_per_s'], ' tok/s', 0)}"
            + f" | {f'{compile_s:.1f} s' if compile_s is not None else '-'} |"
        )
    lines += [
        "",
        "Median ratio of tokens/s, paired round by round (min-max over the rounds; "
        "quartiles in the JSON):",
        "",
        "| ratio | " + " | ".join(f"{n} tokens" for n in lengths) + " |",
        "|---" * (len(lengths) + 1) + "|",
    ]
    for pair, per_length in data["ratios"].items():
        ours, base = pair.split("/")
        name = f"{data['contenders'][ours]['name']} / {data['contenders'][base]['name']}"
        cells = [
            format_spread(per_length[str(n)], "x") if str(n) in per_length else "-" for n in lengths
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines + format_ceiling(data)) + "\n"


def format_ceiling(data: dict) -> list[str]:
    """The memory-bandwidth ceiling and each contender's fraction of it; no
    fraction at all when one is over 100% (then the ceiling is wrong)."""
    bandwidth = data["bandwidth_gb_s"]
    if data["device"] != "cpu":  # the probe reads the host's memory, not the GPU's
        return [
            "",
            f"The host's memory read {format_spread(bandwidth, ' GB/s', 1)} bounds the CPU, "
            "not the GPU: the GPU's own bandwidth is not measured here, so no fraction of a "
            "ceiling is given.",
            "",
        ]
    ceiling = data.get("ceiling_gb_s", bandwidth["max"])
    weights = data.get("weight_count")
    lines = [
        "",
        f"Memory read bandwidth {format_spread(bandwidth, ' GB/s', 1)} ({bandwidth['method']}); "
        f"the ceiling is the fastest read, {ceiling:.1f} GB/s: a token that reads every weight "
        "once cannot come faster than the weights' bytes over it.",
    ]
    by_reader = data.get("bandwidth_by_reader")
    if by_reader:
        lines[-1] += (
            " By reader, medians (min-max): "
            + "; ".join(
                f"{READERS[reader]}, {format_spread(spread, ' GB/s', 1)}"
                for reader, spread in by_reader.items()
            )
            + "."
        )
    fractions = data.get("ceiling_fraction")
    if not fractions or not weights:
        return lines + [""]
    over = {key: f for key, f in fractions.items() if f > 1.0}
    if over:
        names = ", ".join(f"{data['contenders'][k]['name']} ({f:.0%})" for k, f in over.items())
        lines += [
            "",
            f"**No fractions of the ceiling are given**: {names} would exceed it, so the "
            "ceiling was measured too low (the machine's bandwidth moved during the run).",
        ]
    paired = data.get("probe_fraction") or {}
    sustained = data.get("sustained_fraction") or {}
    lines += [
        "",
        "Of the ceiling: the best median over the run's fastest read. Of the probe before "
        "it: the same length's tokens/s in each round over what the probe read right before "
        "that decode, the median (min-max) over the rounds."
        + (
            f" Of the sustained read: the same, over the sustained read right before it "
            f"({data['sustained_gb_s']['method']}; "
            f"{format_spread(data['sustained_gb_s'], ' GB/s', 1)} over the run)."
            if sustained
            else ""
        ),
        "",
        "| model | bytes per token | best median | of the ceiling | of the probe before it |"
        + (" of the sustained read |" if sustained else ""),
        "|---|---|---|---|---|" + ("---|" if sustained else ""),
    ]
    for key, fraction in fractions.items():
        contender = data["contenders"][key]
        best = max(s["median"] for s in contender["tokens_per_s"].values())
        megabytes = weights * contender["bytes_per_weight"] / 1e6
        of_ceiling = "-" if over else f"{fraction:.0%}"
        of_probe = format_percent(paired[key]) if key in paired else "-"
        line = (
            f"| {contender['name']} | {megabytes:.0f} MB | {best:.1f} tok/s | {of_ceiling} "
            f"| {of_probe} |"
        )
        if sustained:
            line += f" {format_percent(sustained[key]) if key in sustained else '-'} |"
        lines.append(line)
    return lines + [""]


def over_ceiling(data: dict) -> list[str]:
    """The contenders whose fraction of the (host's) ceiling is over 100%."""
    if data["device"] != "cpu":
        return []
    return [key for key, f in (data.get("ceiling_fraction") or {}).items() if f > 1.0]


def format_profile(data: dict) -> str:
    """The decode graphs' operations by kind, step 17 against the fast model."""
    ops = data.get("decode_ops")
    if not ops:
        return "(this benchmark data has no operation counts)\n"
    # The fast model's decode graph: our kernels on a CPU, MAX's operations elsewhere.
    fast_graph = "our kernels" if data["device"] == "cpu" else "MAX's operations"
    kinds = sorted(
        set(ops["step17"]) | set(ops["fast"]), key=lambda k: (-ops["step17"].get(k, 0), k)
    )
    lines = [
        f"Operations in the one-token (decode) graph, {data['config']['n_layer']} layers "
        "(constants and weight references left out):",
        "",
        f"| operation | step 17 | fast ({fast_graph}) |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {ops['step17'].get(k, 0)} | {ops['fast'].get(k, 0)} |" for k in kinds]
    lines.append(
        f"| **total** | **{sum(ops['step17'].values())}** | **{sum(ops['fast'].values())}** |"
    )
    lines += format_projection(data.get("projection")) + format_rows(data.get("rows"))
    lines += format_rows(data.get("rows_second"))  # absent from runs before it
    lines += format_attention(data.get("attention"))  # absent from runs before it
    return "\n".join(lines) + "\n"


PROJECTION_NAMES = {
    "max_matmul": "MAX's matmul (`x @ W.T`, one-op graph)",
    "our_kernel": "our kernel (`gpt2_linear_rows`, one-op graph)",
    "our_kernel_dot": "our kernel, vector dot products only (`gpt2_linear_rows_dot`)",
    "our_kernel_widening": "our kernel, bfloat16 widened to float32 (`gpt2_linear_rows_widening`)",
    "torch_linear": "PyTorch's `linear`",
}
# The same, shorter, as the rows table's column heads.
ROWS_COLUMNS = {
    "max_matmul": "MAX's matmul",
    "torch_linear": "PyTorch",
    "our_kernel": "our kernel",
    "our_kernel_dot": "our kernel, no AMX",
    "our_kernel_widening": "our kernel, widened",
}


ROUNDS = (
    f"interleaved rounds, a round's figure the median of {BURST} calls after a pause and "
    f"{WARM_CALLS} untimed calls"
)


def format_projection(projection: dict | None) -> list[str]:
    """The head's projection timed alone (bench --profile), as table lines."""
    if not projection:
        return ["", "(the head's projection was not timed alone: run with --profile)"]
    n_out, n_in = projection["shape"]
    lines = [
        "",
        f"The head's projection alone: one row times the {n_out} x {n_in} "
        f"{projection['dtype']} table ({projection['table_bytes'] / 1e6:.0f} MB), "
        f"{ROUNDS}:",
        "",
        "| implementation | ms per call (min-max) | GB/s read |",
        "|---|---|---|",
    ]
    for key, name in PROJECTION_NAMES.items():
        if key not in projection["milliseconds"]:
            continue
        stats = projection["milliseconds"][key]
        lines.append(f"| {name} | {format_spread(stats)} | {projection['gb_per_s'][key]:.1f} |")
    return lines


def format_rows(rows: dict | None) -> list[str]:
    """Our kernels against MAX's matmul and PyTorch by the number of rows
    (bench --profile)."""
    if not rows:
        return []
    n_out, n_in = rows["shape"]
    title = (
        f"One projection ({n_out} x {n_in}, {rows['dtype']} weights) for a batch of rows, "
        "from a server's batch of decoded tokens to a prompt; milliseconds per call, "
        f"{ROUNDS}:"
    )
    peers = ("max_matmul", "torch_linear")
    return speedup_table(title, "rows", rows["milliseconds"], ROWS_COLUMNS, peers)


ATTENTION_COLUMNS = {
    "max_ops": "MAX's operations",
    "torch_sdpa": "PyTorch",
    "our_kernel": "our kernel",
    "our_kernel_float32": "our kernel, float32",
}


def format_attention(attention: dict | None) -> list[str]:
    """A prompt's attention alone, by prompt length (bench --profile)."""
    if not attention:
        return []
    title = (
        f"A prompt's causal self-attention alone ({attention['heads']} heads of "
        f"{attention['head_dim']}), from c_attn's output to the heads merged: MAX's "
        "operations as the prompt's graph had them before our kernel (every score, then the "
        "causal mask), our kernel (`gpt2_prompt_attention`, float32; with bfloat16 weights "
        "`gpt2_prompt_attention_bf16`, in AMX's tiles where the CPU has them), PyTorch's "
        f"`scaled_dot_product_attention` in {attention['dtype']}; milliseconds per call, "
        f"{ROUNDS}:"
    )
    peers = ("max_ops", "torch_sdpa", "our_kernel_float32")
    return speedup_table(
        title, "prompt tokens", attention["milliseconds"], ATTENTION_COLUMNS, peers
    )


def speedup_table(
    title: str, size_head: str, by_size: dict, columns: dict[str, str], peers: tuple[str, ...]
) -> list[str]:
    """Milliseconds of each way by size ({size: {way: summary}}), our kernel's
    speed-up over each of `peers` that was timed: table lines under `title`."""
    present = next(iter(by_size.values()))
    keys = [key for key in columns if key in present]
    peers = tuple(key for key in peers if key in present)
    lines = [
        "",
        title,
        "",
        f"| {size_head} | "
        + " | ".join([columns[key] for key in keys])
        + "".join(f" | our kernel's speed-up over {columns[peer]}" for peer in peers)
        + " |",
        "|---" * (1 + len(keys) + len(peers)) + "|",
    ]
    for size, ways in by_size.items():
        kernel = ways["our_kernel"]["median"]
        cells = [format_spread(ways[key]) for key in keys]
        cells += [f"{ways[peer]['median'] / kernel:.2f}x" for peer in peers]
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return lines


def plot(data: dict, path: Path) -> None:
    """Tokens/s against the number of generated tokens, a line per contender
    (median, min-max bars), under the bandwidth ceiling."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for contender in data["contenders"].values():
        lengths = sorted(int(n) for n in contender["tokens_per_s"])
        stats = [contender["tokens_per_s"][str(n)] for n in lengths]
        medians = [s["median"] for s in stats]
        errors = [
            [m - s["min"] for m, s in zip(medians, stats, strict=True)],
            [s["max"] - m for m, s in zip(medians, stats, strict=True)],
        ]
        axes.errorbar(lengths, medians, yerr=errors, marker="o", capsize=3, label=contender["name"])
    if data["device"] == "cpu":  # the probe's ceiling is the host's
        axes.axhline(
            data["roofline_tokens_per_s"], color="grey", linestyle="--", label="bandwidth ceiling"
        )
    axes.set_xscale("log", base=2)
    axes.set_xlabel("generated tokens")
    axes.set_ylabel("tokens / s (median, min-max)")
    axes.set_title(f"GPT-2 124M shapes, {data['dtype']}, batch 1, greedy, {data['device']}")
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def output_suffix(data: dict) -> str:
    """'' for the CPU in float32 (results.md, ...), else e.g. '_bfloat16' or
    '_gpu_float32': each device and dtype keeps its own files in the book."""
    if data["device"] == "cpu":
        return "" if data["dtype"] == "float32" else f"_{data['dtype']}"
    return f"_{data['device']}_{data['dtype']}"


def render(data: dict, out: Path) -> str:
    """Write the book's table (results*.md) and plot from the benchmark data."""
    report = format_report(data)
    suffix = output_suffix(data)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"results{suffix}.md").write_text(report)
    (out / f"profile{suffix}.md").write_text(format_profile(data))
    plot(data, out / f"tokens_per_second{suffix}.png")
    (out / f"results{suffix}.json").write_text(json.dumps(data, indent=1) + "\n")
    return report
