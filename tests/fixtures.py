"""Small GPT-2 and Llama checkpoints made locally, for tests that must not
download, with torch and transformers (hf_model, write_checkpoint,
hf_llama); common/random_checkpoint.py writes GPT-2 ones with NumPy and
safetensors only. Also a learner's checkout in a folder of its own
(copy_tutorial) and the runners of the tutorial's commands (run_tool, ...)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A language model predicts the next token from the tokens before it.",
    "Attention lets every position look at the positions before it.",
    "MAX compiles the model into a graph and runs it fast.",
] * 20


def write_tokenizer(directory: Path, vocab_size: int = 300) -> None:
    """A byte-level BPE tokenizer (GPT-2's kind) trained on a few sentences."""
    from tokenizers.implementations import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        SENTENCES, vocab_size=vocab_size, min_frequency=1, show_progress=False
    )
    tokenizer.save(str(Path(directory) / "tokenizer.json"))


def stand_in_device():
    """The CPU as a device object other than the one CPU() returns: where a
    test needs an accelerator's device that is not MAX's default one, on a
    machine with only a CPU."""
    from max.driver import CPU

    class StandInCPU(CPU):
        """The CPU, as an object of its own."""

    return StandInCPU()


def tutorial_model_devices(
    monkeypatch, module: str = "solutions.solution_15", loader: str = "load_pretrained"
) -> list[str]:
    """The type of MAX's default device each time a tool loads the tutorial's
    model (`module`.`loader`: step 13's by default, step 23's with
    load_llama), noted as it starts; with stand_in_device() as the default,
    "CPU" means the tool pinned the CPU."""
    import importlib

    from max.experimental.tensor import defaults

    loading = importlib.import_module(module)
    devices: list[str] = []
    load = getattr(loading, loader)

    def noting(*args, **kwargs):
        devices.append(type(defaults()[1].devices[0]).__name__)
        return load(*args, **kwargs)

    monkeypatch.setattr(loading, loader, noting)
    return devices


def hf_model(seed: int = 0, initializer_range: float = 0.02, **config):
    """A randomly initialized Hugging Face GPT2LMHeadModel (torch), eval mode."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    sizes = dict(vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    torch.manual_seed(seed)
    hf_config = GPT2Config(
        **{**sizes, **config},
        initializer_range=initializer_range,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return GPT2LMHeadModel(hf_config).eval()


def write_checkpoint(directory: Path, model=None, **config) -> Path:
    """save_pretrained a model (by default a small random one) and a tokenizer."""
    directory = Path(directory)
    model = hf_model(**config) if model is None else model
    model.save_pretrained(directory)
    write_tokenizer(directory, vocab_size=min(300, model.config.vocab_size))
    return directory


def hf_llama(seed: int = 0, **config):
    """A random Hugging Face LlamaForCausalLM (torch), eval mode: 4 query heads
    sharing 2 key/value heads, weights large enough that every part counts."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    sizes = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=5000.0,
        tie_word_embeddings=True,  # as SmolLM2; transformers' LlamaConfig unties by default
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**{**sizes, **config})).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 1:  # Llama has no biases: a 1-D parameter is a norm's scale
                param.copy_(1 + 0.1 * torch.randn_like(param))
            else:
                param.normal_(0, 0.1)
    return model


def run_tool(module: str, *args: str, timeout: float, **env: str):
    """`python -m module args` from the repository, as a learner runs it:
    MAX-safe environment (with `env` added), output captured as text."""
    return run_python(["-m", module, *args], timeout=timeout, **env)


def run_code(code: str, *, timeout: float, **env: str):
    """`python -c code` from the repository, as run_tool runs a module."""
    return run_python(["-c", code], timeout=timeout, **env)


def run_python(arguments: list[str], *, timeout: float, **env: str):
    import subprocess
    import sys

    from common import max_runtime

    return subprocess.run(
        [sys.executable, *arguments],
        cwd=Path(__file__).resolve().parents[1],
        env=max_runtime.child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def copy_tutorial(
    root: Path, names: tuple[str, ...], pristine_skeleton: Callable[[int], str | None]
) -> Path:
    """The repository's folders and files `names`, copied to a new folder
    `root`, each step file its untouched skeleton (this checkout's steps may be
    filled in): what a learner has before writing a line. The test passes
    tools.learn's `pristine_skeleton`, which this room may not import."""
    import shutil

    from common import steps
    from common.steps import REPO

    root.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "figures_out")
    for name in names:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            shutil.copy2(source, root / name)
    for number in steps.numbers():
        skeleton = pristine_skeleton(number)
        if skeleton is not None:
            (root / "steps" / f"step_{number:02d}.py").write_text(skeleton)
    return root
