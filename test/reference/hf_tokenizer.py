#!/usr/bin/python3
"""Reference Hugging Face byte-level BPE tokenizer and chat-template renderer, written independently of the JS library.

Usage: hf_tokenizer.py MODEL_DIR INPUT_JSON
INPUT_JSON: {"texts": [str], "conversations": [{"messages": [{role, content}], "add_generation_prompt": bool}]}
Prints:     {"texts": [[id]], "conversations": [{"text": rendered, "ids": [id]}]}

Tokenization follows GPT-2 / Hugging Face tokenizers: added tokens are split out first (leftmost, longest match),
the rest is normalized (none or NFC), pre-tokenized (ByteLevel with GPT-2's regex, or Split then ByteLevel), mapped
to byte symbols and merged by BPE rank (optionally taking whole vocabulary words first, `ignore_merges`).
Conversations are rendered as transformers' apply_chat_template does (jinja2 sandbox, trim_blocks, lstrip_blocks,
raise_exception) and tokenized without adding special tokens. Only the standard library and jinja2 are needed:
\\p{L} and \\p{N} are expanded into explicit character classes for the `re` module.
"""

import json
import re
import sys
import unicodedata
from pathlib import Path

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def category_ranges(major):
    """The body of a character class matching every code point whose general category starts with `major`."""
    parts, start = [], None
    for cp in range(sys.maxunicode + 2):
        inside = cp <= sys.maxunicode and unicodedata.category(chr(cp)).startswith(major)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            parts.append(re.escape(chr(start)) + ("-" + re.escape(chr(cp - 1)) if cp - 1 > start else ""))
            start = None
    return "".join(parts)


_CLASSES = {}


def compile_pattern(pattern):
    """Compiles an Oniguruma-style pattern with the `re` module, expanding \\p{L} and \\p{N}."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        m = re.match(r"\\p\{([LN])\}", pattern[i:])
        if m:
            body = _CLASSES.setdefault(m.group(1), category_ranges(m.group(1)))
            out.append(body if in_class else "[" + body + "]")
            i += len(m.group(0))
            continue
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return re.compile("".join(out))


class ByteLevelBPE:
    def __init__(self, tok):
        model = tok["model"]
        assert model["type"] == "BPE", model["type"]
        for key in ("byte_fallback", "dropout", "continuing_subword_prefix", "end_of_word_suffix"):
            assert not model.get(key), f"model.{key} is not supported by this reference"
        self.vocab = model["vocab"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.ignore_merges = model.get("ignore_merges", False)
        self.added = {}
        for t in tok.get("added_tokens", []):
            assert not (t["lstrip"] or t["rstrip"] or t["single_word"] or t["normalized"]), f"added token flags of {t}"
            self.added[t["content"]] = t["id"]
        normalizer = tok.get("normalizer")
        assert normalizer is None or normalizer["type"] == "NFC", normalizer
        self.nfc = normalizer is not None
        pre = tok["pre_tokenizer"]
        self.steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
        self.patterns = [compile_pattern(s["pattern"]["Regex"]) if s["type"] == "Split" else None for s in self.steps]
        self.gpt2 = compile_pattern(GPT2_PATTERN)
        self.byte_encoder = bytes_to_unicode()
        self.cache = {}

    def split_added(self, text):
        """Pieces of text, each either an added token's content or text between them."""
        pieces, start, i = [], 0, 0
        by_length = sorted(self.added, key=len, reverse=True)
        while i < len(text):
            match = next((a for a in by_length if text.startswith(a, i)), None)
            if match is None:
                i += 1
                continue
            if i > start:
                pieces.append(text[start:i])
            pieces.append(match)
            i += len(match)
            start = i
        if start < len(text):
            pieces.append(text[start:])
        return pieces

    def pre_tokenize(self, text):
        pieces = [text]
        for step, pattern in zip(self.steps, self.patterns):
            if step["type"] == "Split":
                assert step["behavior"] == "Isolated" and not step["invert"], step
                split = []
                for p in pieces:
                    last = 0
                    for m in pattern.finditer(p):
                        split += [p[last : m.start()], m.group(0)]
                        last = m.end()
                    split.append(p[last:])
                pieces = [p for p in split if p]
            elif step["type"] == "ByteLevel":
                out = []
                for p in pieces:
                    if step.get("add_prefix_space") and not p.startswith(" "):
                        p = " " + p
                    out += self.gpt2.findall(p) if step.get("use_regex", True) else [p]
                pieces = ["".join(self.byte_encoder[b] for b in p.encode("utf-8")) for p in out]
            else:
                raise ValueError(f"pre-tokenizer {step['type']} is not supported by this reference")
        return pieces

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [word]
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            ranked = [(self.ranks.get((a, b), float("inf")), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, _ = min(ranked)
            if rank == float("inf"):
                break
            first, second = next((parts[i], parts[i + 1]) for r, i in ranked if r == rank)
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        self.cache[word] = parts
        return parts

    def encode(self, text):
        ids = []
        for piece in self.split_added(text):
            if piece in self.added:
                ids.append(self.added[piece])
                continue
            if self.nfc:
                piece = unicodedata.normalize("NFC", piece)
            for word in self.pre_tokenize(piece):
                ids += [self.vocab[t] for t in self.bpe(word)]
        return ids


def token_content(value):
    return value.get("content") if isinstance(value, dict) else value


def chat_template(folder, config):
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.exists():
        return jinja_file.read_text()
    template = config.get("chat_template")
    if isinstance(template, list):
        template = next(t["template"] for t in template if t["name"] == "default")
    return template


def render(template_source, config, messages, add_generation_prompt):
    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    special = {k: token_content(config.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    special = {k: v for k, v in special.items() if v is not None}
    return env.from_string(template_source).render(messages=messages, add_generation_prompt=add_generation_prompt, **special)


def main():
    folder, inputs = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    tokenizer = ByteLevelBPE(json.loads((folder / "tokenizer.json").read_text()))
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    template = chat_template(folder, config)
    conversations = []
    for conv in inputs.get("conversations", []):
        text = render(template, config, conv["messages"], conv.get("add_generation_prompt", False))
        conversations.append({"text": text, "ids": tokenizer.encode(text)})
    json.dump({"texts": [tokenizer.encode(t) for t in inputs.get("texts", [])], "conversations": conversations}, sys.stdout)


if __name__ == "__main__":
    main()
