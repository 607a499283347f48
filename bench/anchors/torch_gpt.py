"""PyTorch figures for the GPT-2 block of our engine (bench:train's tiny and small rows), on this CPU.

    python3 torch_gpt.py train  d L H T V B [--cpu-time] [--seconds S]   # forward + backward + AdamW: tokens/s
    python3 torch_gpt.py sample d L H T V B [--cpu-time] [--seconds S]   # KV-cache generation: new tokens/s

The model of lib/model/gpt.ts, written out in plain PyTorch: token and learned position embeddings, L pre-LayerNorm
blocks (causal attention over H heads from one qkv layer, then an MLP of width 4d with tanh-approximated GELU),
a final LayerNorm and an output layer without bias, not tied to the embedding. Every other linear layer and every
LayerNorm has a bias; LayerNorm epsilon 1e-5; float32. Its parameter count is printed, and bench:train refuses the
figure unless it equals ours (lib/model/config.ts, countParameters).

train:  B sequences of T random tokens; each position predicts the next (cross-entropy over T-1 positions of the
        T computed, as forwardBackward does), backward, then an AdamW step. B*T tokens a step.
sample: B prompts of 4 tokens, each generating to T with a key/value cache and multinomial sampling at
        temperature 1. B*(T-4) new tokens a call.
Command line, threads and timing: anchor.py. Run with /usr/bin/python3 (Debian's python3-torch).
"""
from anchor import options, report, timed

opts = options(("d", "L", "H", "T", "V", "B"), (64, 2, 4, 32, 64, 32))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

d, L, H, T, V, B = (opts.shape[k] for k in ("d", "L", "H", "T", "V", "B"))
assert d % H == 0, f"d ({d}) must be a multiple of H ({H})"
hd = d // H


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, start, cache):
        b, t, _ = x.shape  # [b, t, d]: positions start .. start+t-1
        q, k, v = (z.view(b, t, H, hd).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1))  # [b, H, t, hd]
        if cache is not None:  # decoding: keys and values of the earlier positions come first
            if cache:
                k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
            cache[:] = [k, v]
        s = k.shape[2]  # positions attended to, 0 .. s-1
        scores = (q @ k.transpose(-2, -1)) * hd**-0.5  # [b, H, t, s]
        if t > 1:
            future = torch.arange(s)[None, :] > torch.arange(start, start + t)[:, None]  # [t, s]
            scores = scores.masked_fill(future, float("-inf"))
        x = x + self.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, V, bias=False)

    def forward(self, tokens, start=0, caches=None):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(start, start + t))  # [b, t, d]
        for i, block in enumerate(self.blocks):
            x = block(x, start, None if caches is None else caches[i])
        return self.head(self.ln_f(x))  # [b, t, V]


model = GPT()
params = sum(p.numel() for p in model.parameters())

if opts.mode == "train":
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, V, (B, T))

    def call():
        logits = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    per_s, tokens_per_s = timed(opts, call, B * T)
else:
    prompts = torch.randint(0, V, (B, 4))

    @torch.no_grad()
    def call():
        caches = [[] for _ in range(L)]
        logits = model(prompts, 0, caches)
        for position in range(prompts.shape[1], T):  # the token at `position`, drawn from the logits before it
            token = torch.multinomial(logits[:, -1].softmax(-1), 1)  # [B, 1]
            if position + 1 < T:
                logits = model(token, position, caches)

    per_s, tokens_per_s = timed(opts, call, B * (T - 4))

report(opts, "gpt", params, per_s, tokens_per_s)
