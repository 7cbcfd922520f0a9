"""The GGUF bench's table (llama_gguf.py's data): the machine and the run
once, then a table a file, a row a contender."""

from __future__ import annotations

from devtools.bench import stats
from devtools.bench.llama_gguf import CONTENDERS


def format_report(data: dict) -> str:
    """The report of llama_gguf.measure's data; the earlier one-file data
    (a "file" and no "files") as it was laid out."""
    if "files" not in data:
        return format_one_file(data)
    from devtools.bench.llama import table_head

    *most, last = [str(n) for n in data["lengths"]]
    lengths = f"{', '.join(most)} and {last}" if most else last
    # Runs before the source was recorded were all of SmolLM2's file.
    source = f"`{data['source']}`" if "source" in data else "SmolLM2-135M-Instruct's GGUF file"
    lines = table_head(
        data,
        f"{source} and llama.cpp's requantizations of it, batch 1; "
        f"a chat prompt, then {lengths} tokens greedy; "
        f"a {data['long_prompt_tokens']}-token prompt timed to its first token; "
        f"{data['threads']} threads for llama.cpp and PyTorch; "
        f"{data['rounds']} interleaved round{'s' * (data['rounds'] > 1)} after a warm-up.",
        [],  # each file's table has its own
    )
    n = str(data["headline"])
    lines += [
        "",
        f"The memory's read rate, probed right before each decode: "
        f'{stats.format_spread(data["probe"], " GB/s", 1)}. "Of the read rate": the '
        f"weights a token reads times the tokens/s at {n} tokens, over the rate probed right "
        "before that run, round by round.",
    ]
    if "sustained" in data:
        lines[-1] += (
            f" The probe also reads its array on end for {data['sustain_seconds']:g} s, as a "
            "decode reads, where the fastest of three short reads catches the memory at its "
            "quickest; that sustained read: "
            f'{stats.format_spread(data["sustained"], " GB/s", 1)}. "Of the sustained read": '
            "the same, over the sustained read right before that run."
        )
    if data.get("files_left_out"):
        lines += ["", data["files_left_out"].rstrip(".") + "."]
    for file in data["files"]:
        lines += ["", *file_table(file, data["lengths"], n, data["reference"])]
    return "\n".join(lines) + "\n"


def file_table(file: dict, lengths: list[int], n: str, reference: str) -> list[str]:
    """One file's lines: what it holds, its table, what ours took to load and
    what it answered, and who was left out."""
    columns = [
        "contender",
        "MB a token reads",
        *(f"decode, {length} tokens" for length in lengths),
        "first token",
        "prompt, tokens/s",
        f"ours / it, {n} tokens",
        "of the read rate",
        *(["of the sustained read"] if "sustained_reads" in file else []),
        "greedy tokens as ours",
    ]
    lines = [
        f"**{file['name']}**: {file['file']}; a {file['prompt_tokens']}-token chat prompt.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for key, label in CONTENDERS.items():
        if key in file["summaries"]:
            lines.append(row(label, file, key, n))
    if "compile_seconds" in file:
        lines += [
            "",
            f"Ours read and widened the file's weights in {file['load_seconds']:.0f} s, then "
            f"compiled in {file['compile_seconds']:.0f} s.",
        ]
    if file["answer"].strip():
        lines.append(
            f"The answer of {CONTENDERS[reference].split(' (')[0]} begins: "
            f'"{file["answer"].strip().splitlines()[0]} ..."'
        )
    lines += [
        f"{key} was not measured: {why.rstrip('.')}." for key, why in file["left_out"].items()
    ]
    return lines


def row(label: str, file: dict, key: str, n: str) -> str:
    """A contender's row: the bytes it reads a token, its speeds, the
    reference over it, its share of the read rate (and of the sustained
    read, where the file's data has it), its tokens against the reference's."""
    summary = file["summaries"][key]
    ratio = file["ratios"].get(key, {}).get(n)
    agreement = file["agreement"].get(key)
    cells = [
        label,
        f"{file['bytes_per_token'][key] / 1e6:.0f}",
        *(stats.format_spread(s, " tok/s", 1) for s in summary["decode_tok_s"].values()),
        stats.format_spread(summary["first_token_ms"], " ms", 0),
        stats.format_spread(summary["prompt_tok_s"], "", 0),
        stats.format_spread(ratio, "x") if ratio else "-",
        stats.format_percent(file["reads"][key][n]),
        *(
            [stats.format_percent(file["sustained_reads"][key][n])]
            if "sustained_reads" in file
            else []
        ),
        f"the first {agreement['agree']} of {agreement['of']}" if agreement else "-",
    ]
    return "| " + " | ".join(cells) + " |"


# -- the earlier data: one file, one length --------------------------------------------


def format_one_file(data: dict) -> str:
    """The table of the earlier data, one file at one length (the book's
    table until it is measured again)."""
    from devtools.bench.llama import table_head

    lines = table_head(
        data,
        f"The file: {data['file']}, batch 1, "
        f"a {data['prompt_tokens']}-token chat prompt, {data['tokens']} tokens greedy, "
        f"{data['threads']} threads for llama.cpp and PyTorch; "
        f"{data['rounds']} interleaved rounds after a warm-up.",
        ["contender", "decode", "first token", "ours / it, paired", "greedy tokens as ours"],
    )
    for key, label in CONTENDERS.items():
        if key in data["summaries"]:
            lines.append(one_file_row(label, data, key))
    lines += [
        "",
        f"Ours read and widened the file's weights in {data['load_seconds']:.0f} s, then "
        f"compiled in {data['compile_seconds']:.0f} s (the graph refers to the weights by name, so "
        "MAX's cache serves every checkpoint of these shapes). Its answer begins: "
        f'"{data["answer"].strip().splitlines()[0]} ..."',
    ]
    lines += [
        f"{key} was not measured: {why.rstrip('.')}." for key, why in data["left_out"].items()
    ]
    return "\n".join(lines) + "\n"


def one_file_row(label: str, data: dict, key: str) -> str:
    """A contender's row: its speeds, ours over it, and its tokens against ours."""
    summary = data["summaries"][key]
    ratio, agreement = data["ratios"].get(key), data["agreement"].get(key)
    ratio_cell = stats.format_spread(ratio, "x") if ratio else "-"
    agreement_cell = f"the first {agreement['agree']} of {agreement['of']}" if agreement else "-"
    return (
        f"| {label} | {stats.format_spread(summary['decode_tok_s'], ' tok/s', 1)} "
        f"| {stats.format_spread(summary['first_token_ms'], ' ms', 0)} "
        f"| {ratio_cell} | {agreement_cell} |"
    )
