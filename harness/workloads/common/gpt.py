"""A small GPT-style decoder after nanoGPT (no dropout and no biases, so a step is deterministic and
every weight but the LayerNorms' is a matmul's), its model FLOPs per token for MFU, and the
synthetic token stream it learns."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

# The sdpa_backend column's values: torch.nn.attention.SDPBackend's names, lower-cased, without
# "_attention".
SDPA_BACKENDS: dict[str, SDPBackend] = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
# distinct tokens the stream cycles through (fewer when the vocabulary is smaller)
PATTERN_TOKENS = 256


@dataclass(frozen=True)
class GPTConfig:
    """A model and the batch it trains on: every sequence is `seq_len` tokens long."""

    vocab_size: int
    seq_len: int
    n_layer: int
    n_head: int
    d_model: int
    batch_size: int
    # AdamW's constant learning rate (no schedule: a few steps are timed, not a run)
    lr: float

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len


CONFIGS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(
        vocab_size=256, seq_len=64, n_layer=2, n_head=2, d_model=64, batch_size=8, lr=1e-3
    ),
    "small": GPTConfig(
        vocab_size=1024, seq_len=128, n_layer=4, n_head=4, d_model=256, batch_size=8, lr=1e-3
    ),
    # GPT-2 small's shape; the vocabulary padded from 50257 to a multiple of 64 as nanoGPT does
    "gpt2-125m": GPTConfig(
        vocab_size=50304, seq_len=1024, n_layer=12, n_head=12, d_model=768, batch_size=16, lr=6e-4
    ),
}


def flops_per_token(params: int, n_layer: int, n_head: int, head_dim: int, seq_len: int) -> int:
    """One token's training-step FLOPs, 6·N + 12·L·H·Q·T (PaLM appendix B, nanoGPT's estimate_mfu).
    The causal mask's skipped half is counted, as both do, so figures compare; recomputation is
    never counted."""
    return 6 * params + 12 * n_layer * n_head * head_dim * seq_len


def counted_params(model: GPT) -> int:
    """N as nanoGPT counts it: every parameter but the position embedding (a lookup, no matmul). The
    token embedding is tied to the head, a matmul every token pays; the LayerNorm weights (0.02-0.3%
    of N) are within the noise."""
    return sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, backend: SDPBackend) -> None:
        super().__init__()
        self.n_head, self.backend = config.n_head, backend
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        shape = (batch, seq, self.n_head, width // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in self.qkv(x).split(width, dim=2))
        # Here, so a forward alone runs the named backend and torch.compile guards its graph on it;
        # the training step also sets it around the whole call, where the compiled graph's kernel is
        # chosen.
        with sdpa_kernel(self.backend):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(batch, seq, width))


class _Block(nn.Module):
    def __init__(self, config: GPTConfig, backend: SDPBackend) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, bias=False)
        self.attn = CausalSelfAttention(config, backend)
        self.ln_2 = nn.LayerNorm(config.d_model, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, 4 * config.d_model, bias=False),
            nn.GELU(),
            nn.Linear(4 * config.d_model, config.d_model, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """forward(tokens, targets) -> the mean cross-entropy of next-token prediction."""

    def __init__(self, config: GPTConfig, backend: SDPBackend, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.seq_len, config.d_model)
        self.blocks = nn.ModuleList(_Block(config, backend) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, bias=False)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.wte.weight
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's: N(0, 0.02), the residual projections scaled by 1/sqrt(2·layers)."""
        for name, param in self.named_parameters():
            if param.dim() == 2:
                residual = name.endswith(("attn.proj.weight", "mlp.2.weight"))
                std = 0.02 / math.sqrt(2 * self.config.n_layer) if residual else 0.02
                nn.init.normal_(param, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def token_batches(
    config: GPTConfig, device: torch.device, count: int, seed: int = 0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`count` (tokens, next tokens) windows of a stream cycling through PATTERN_TOKENS tokens, so a
    training loss falls step after step; kept on the device so the timed steps measure the model,
    not a data pipeline."""
    gen = torch.Generator().manual_seed(seed)
    distinct = min(PATTERN_TOKENS, config.vocab_size)
    pattern = torch.randperm(config.vocab_size, generator=gen)[:distinct]
    span = config.seq_len + 1
    stream = pattern.repeat(math.ceil(span / distinct) + 1)
    batches = []
    for _ in range(count):
        offsets = torch.randint(0, distinct, (config.batch_size,), generator=gen)
        windows = torch.stack([stream[o : o + span] for o in offsets.tolist()])
        batches.append(
            (windows[:, :-1].contiguous().to(device), windows[:, 1:].contiguous().to(device))
        )
    return batches
