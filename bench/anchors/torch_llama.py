"""Reference figures for a Llama-style decoder (bench:train's llama rows), measured with PyTorch on this CPU.

    python3 torch_llama.py train  d L H KV FF T V B [--cpu-time] [--seconds S]   # fwd+bwd+AdamW: tokens/s
    python3 torch_llama.py sample d L H KV FF T V B [--cpu-time] [--seconds S]   # KV-cache generation: new tokens/s

The block as published (Llama, SmolLM, Qwen2 without biases): RMSNorm before attention and MLP, rotary
positions on queries and keys (Hugging Face's rotate_half, theta 10000), grouped-query attention (KV key/value
heads, each repeated for H/KV query heads with repeat_interleave), a SwiGLU MLP of hidden width FF, no biases,
a final RMSNorm and the output layer tied to the token embedding. Norm epsilon 1e-5. Float32 throughout.

train:  one step = forward + cross-entropy + backward + AdamW step on B x T random tokens (B*T tokens a step).
sample: B prompts of 4 tokens generating to T with a KV cache, multinomial sampling (B*(T-4) new tokens a call).
Command line, threads and timing: anchor.py. Needs Debian's python3-torch (apt-get install python3-torch
libopenblas0-pthread); run with /usr/bin/python3.
"""
from anchor import options, report, timed

opts = options(("d", "L", "H", "KV", "FF", "T", "V", "B"), (512, 8, 8, 4, 1376, 128, 8192, 8))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

d, L, H, KV, FF, T, V, B = (opts.shape[k] for k in ("d", "L", "H", "KV", "FF", "T", "V", "B"))
hd, eps, theta = d // H, 1e-5, 10000.0


class RMSNorm(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(d))

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * s.weight


def rotate_half(x):
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return torch.cat((-x2, x1), dim=-1)


inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
emb = torch.cat((angles, angles), dim=-1)
COS, SIN = emb.cos(), emb.sin()  # [T, hd]


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm1, s.norm2 = RMSNorm(), RMSNorm()
        s.q, s.k, s.v = nn.Linear(d, d, bias=False), nn.Linear(d, KV * hd, bias=False), nn.Linear(d, KV * hd, bias=False)
        s.o = nn.Linear(d, d, bias=False)
        s.gate, s.up, s.down = nn.Linear(d, FF, bias=False), nn.Linear(d, FF, bias=False), nn.Linear(FF, d, bias=False)

    def forward(s, x, start=0, cache=None):
        b, t, _ = x.shape
        h = s.norm1(x)
        q = s.q(h).view(b, t, H, hd).transpose(1, 2)
        k = s.k(h).view(b, t, KV, hd).transpose(1, 2)
        v = s.v(h).view(b, t, KV, hd).transpose(1, 2)
        cos, sin = COS[start : start + t], SIN[start : start + t]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is not None:  # incremental decoding: append this step's keys and values (per key/value head)
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / hd**0.5
        if t > 1:
            att = att.masked_fill(torch.triu(torch.ones(t, k.shape[2], dtype=torch.bool), 1 + k.shape[2] - t), float("-inf"))
        x = x + s.o((att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
        h = s.norm2(x)
        return x + s.down(F.silu(s.gate(h)) * s.up(h))


class Llama(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok = nn.Embedding(V, d)
        s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.norm = RMSNorm()

    def forward(s, idx, start=0, caches=None):
        x = s.tok(idx)
        for i, blk in enumerate(s.blocks):
            x = blk(x, start, None if caches is None else caches[i])
        return F.linear(s.norm(x), s.tok.weight)  # tied: the output layer is the embedding


m = Llama()
params = sum(p.numel() for p in m.parameters())

if opts.mode == "train":
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def step():
        loss = F.cross_entropy(m(x).view(-1, V), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    per_s, tok_s = timed(opts, step, B * T)
else:
    prompt = torch.randint(0, V, (B, 4))

    @torch.no_grad()
    def generate():
        caches = [[] for _ in range(L)]
        logits = m(prompt, 0, caches)
        for pos in range(prompt.shape[1], T):
            nxt = torch.multinomial(logits[:, -1].softmax(-1), 1)
            logits = m(nxt, pos, caches)

    per_s, tok_s = timed(opts, generate, B * (T - 4))

report(opts, "llama", params, per_s, tok_s)
