"""A small decoder-only transformer (GPT), written once for both gt and
PyTorch: build(gt) and build(torch) give the same model classes, with the
same parameter names, so a PyTorch user changes only the import.

    GPT(vocab, block_size, d_model, heads, layers)(idx[B, T] int64) -> logits[B, T, vocab]
"""

import math


def build(lib):
    """The model classes over `lib` (the `gt` or the `torch` module)."""
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, d_model, heads, block_size):
            super().__init__()
            self.heads = heads
            # Separate query, key and value projections (as LLaMA's): splitting
            # each one's output features across workers splits whole heads
            # (tensor parallelism). No biases: a key bias shifts every score of
            # a row alike, so softmax gives it no gradient but rounding noise,
            # which Adam would scale up to full-size steps.
            self.query = nn.Linear(d_model, d_model, bias=False)
            self.key = nn.Linear(d_model, d_model, bias=False)
            self.value = nn.Linear(d_model, d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model)
            # Above the diagonal: positions not seen yet.
            self.register_buffer("future", lib.tril(lib.ones(block_size, block_size)) == 0)

        def forward(self, x):
            B, T, C = x.shape
            d = C // self.heads
            q, k, v = (f(x).reshape(B, T, self.heads, d).transpose(1, 2) for f in (self.query, self.key, self.value))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # [B, heads, T, T]
            weights = scores.masked_fill(self.future[:T, :T], float("-inf")).softmax(-1)
            return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self, d_model, heads, dropout, block_size):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.attn = CausalSelfAttention(d_model, heads, block_size)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, 4 * d_model)
            self.out = nn.Linear(4 * d_model, d_model)
            self.drop = nn.Dropout(dropout)

        def forward(self, x):
            x = x + self.drop(self.attn(self.ln1(x)))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self, vocab, block_size, d_model=32, heads=4, layers=2, dropout=0.0):
            super().__init__()
            self.block_size = block_size
            self.wte = nn.Embedding(vocab, d_model)
            self.wpe = nn.Embedding(block_size, d_model)
            self.blocks = nn.ModuleList([Block(d_model, heads, dropout, block_size) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)
            self.register_buffer("positions", lib.arange(block_size))

        def forward(self, idx):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(self.positions[:T])
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

        def loss(self, idx, targets):
            logits = self(idx)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT
