"""The serving results as the book shows them: a table per metric, how a
served token's time splits, our throughput against each peer's, and a plot;
all from the JSON data alone."""

from __future__ import annotations

from pathlib import Path

SERVER = "max serve (our GPT-2)"
BATCHED = "transformers `generate`, batched"
LLAMA = "llama.cpp's server (llama-cpp-python, f32)"


def level(rows: list[dict], concurrency: int) -> dict | None:
    return next((row for row in rows if row["concurrency"] == concurrency), None)


def latency(stats: dict) -> str:
    if stats.get("p50") is None:
        return ""
    return f"{stats['p50']:.0f} / {stats['p99']:.0f} ms"


def row(name: str, stats: dict) -> str:
    return (
        f"| {name} | {stats['concurrency']} | {stats['tokens_per_second']:.1f} | "
        f"{latency(stats['ttft_ms'])} | {latency(stats['itl_ms'])} |"
    )


def table(data: dict) -> str:
    lines = [
        f"Measured on {data['machine']}; a GPT-2 124M-shaped checkpoint, "
        f"{data['max_tokens']} greedy tokens per request, one contender at a time.",
        "",
        "| contender | concurrency | tokens/s | TTFT p50 / p99 | ITL p50 / p99 |",
        "|---|---|---|---|---|",
    ]
    lines += [row(SERVER, stats) for stats in data["server"]]
    checked = data.get("cross_check") or {}
    if "skipped" in checked:
        lines.append(f"| `max benchmark` against the same server | | {checked['skipped']} | | |")
    elif checked:
        lines.append(row("`max benchmark` against the same server", checked))
    lines += [row(BATCHED, stats) for stats in data["transformers"]]
    llama = data.get("llama_server") or {}
    if "skipped" in llama:
        lines.append(f"| {LLAMA} | | {llama['skipped']} | | |")
    lines += [row(LLAMA, stats) for stats in llama.get("levels", [])]
    lines.append(row("ours, fast (fast/gpt2.py), one stream", data["fast"]))
    return (
        "\n".join(lines + ["", *execution_time(data.get("server_executions")), *ratios(data)])
        + "\n"
    )


def execution_time(split: dict | None) -> list[str]:
    """Where a token's time went at concurrency 1, from the model worker's
    execution log (executions.py), or nothing when none was logged."""
    if not split:
        return []
    token_ms = split["model_ms"] + split["between_ms"]
    return [
        f"At concurrency 1, a token (median of {split['executions']} model executions) spent "
        f"{split['model_ms']:.1f} ms in our model's compiled graph and "
        f"{split['between_ms']:.1f} ms in MAX's pipeline between two executions "
        f"({split['between_ms'] / token_ms:.0%} of {token_ms:.1f} ms).",
        "",
    ]


def ratio(text: str, ours: dict | None, theirs: dict | None) -> list[str]:
    """One line: our tokens/s against a peer's, and their ratio; none when
    either level was not measured."""
    if not ours or not theirs:
        return []
    mine, peer = ours["tokens_per_second"], theirs["tokens_per_second"]
    return [f"- {text}: {mine:.1f} vs {peer:.1f} tokens/s ({mine / peer:.2f}x)."]


def ratios(data: dict) -> list[str]:
    """max serve against each peer, where the comparison says most: one
    stream against our fast path, and 16 at once against the batched peers."""
    served = level(data["server"], 16)
    llama = (data.get("llama_server") or {}).get("levels", [])
    return [
        *ratio(
            "One stream, max serve against our fast path",
            level(data["server"], 1),
            data["fast"],
        ),
        *ratio(
            "16 at once, max serve against transformers batched",
            served,
            level(data["transformers"], 16),
        ),
        *ratio("16 at once, max serve against llama.cpp's server", served, level(llama, 16)),
    ]


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 3.8))
    for rows, label, colour in (
        (data["server"], "max serve (our GPT-2)", "#4c72b0"),
        (data["transformers"], "transformers generate, batched", "#999999"),
        ((data.get("llama_server") or {}).get("levels", []), "llama.cpp's server", "#55a868"),
    ):
        if not rows:
            continue
        levels = [r["concurrency"] for r in rows]
        axis.plot(levels, [r["tokens_per_second"] for r in rows], "o-", label=label, color=colour)
    axis.axhline(
        data["fast"]["tokens_per_second"],
        ls="--",
        color="#dd8452",
        label="fast/gpt2.py, one stream",
    )
    axis.set_xscale("log", base=2)
    axis.set_xlabel("concurrent requests")
    axis.set_ylabel("generated tokens / s")
    axis.set_title(f"GPT-2 124M shapes, {data['max_tokens']} greedy tokens per request")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
